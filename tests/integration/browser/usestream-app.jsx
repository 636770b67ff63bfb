// A small chat page on @langchain/langgraph-sdk/react's useStream, used by
// browser-usestream.test.mjs in Chromium against threadcast. It does what
// LangChain's agent-chat-ui does with the hook: fetchStateHistory, submits
// with streamMode ["values"], streamSubgraphs and streamResumable, a human
// message as content blocks, an interrupt answered by an Approve button
// (a resume command: for a request of LangChain's human-in-the-loop
// middleware, {action_requests, review_configs}, its actions listed and the
// middleware's {decisions} sent), regenerate from a message's parent
// checkpoint, and a thread list from threads.search that switches the hook's
// threadId.
//
// The page is served from an origin of its own and calls the API (?api=…)
// cross-origin. It keeps, on window.__tc, what the test checks beyond the
// DOM: the hook's state after each render, the threads it made, the runs,
// errors, and every distinct text each rendered message showed (recorded
// from the DOM by a MutationObserver), which tells partial renders and a
// repeated token run apart.
import { useEffect, useMemo, useState } from 'react';
import { createRoot } from 'react-dom/client';
import { useStream } from '@langchain/langgraph-sdk/react';
import { Client } from '@langchain/langgraph-sdk';

const params = new URLSearchParams(window.location.search);
const apiUrl = params.get('api');
const assistantId = params.get('assistant') ?? 'agent';

const tc = {
  made: [], runs: [], errors: [], finished: 0, submitted: 0,
  seen: {}, state: null, regenerated: null,
};
window.__tc = tc;

/** A message's text: a string as it is, content blocks as their text blocks. */
const textOf = (m) => (typeof m.content === 'string' ? m.content
  : (m.content ?? []).filter((b) => b?.type === 'text').map((b) => b.text).join(''));

/** The value as a request of LangChain's human-in-the-loop middleware, or null. */
const hitlRequest = (v) => (v && Array.isArray(v.action_requests) && Array.isArray(v.review_configs) ? v : null);

/** What the chat UI submits: options common to every run. */
const RUN = { streamMode: ['values'], streamSubgraphs: true, streamResumable: true };

function Threads({ client, current, onPick, version }) {
  const [{ threads, listed }, setList] = useState({ threads: [], listed: 0 });
  useEffect(() => {
    let live = true;
    client.threads.search({ metadata: { graph_id: assistantId }, limit: 100 }).then((found) => {
      if (live) setList((l) => ({ threads: found, listed: l.listed + 1 }));
    }, (e) => tc.errors.push(`threads.search: ${e}`));
    return () => { live = false; };
  }, [client, version]);
  return (
    <ul data-testid="threads" data-listed={listed}>
      {threads.map((t) => (
        <li key={t.thread_id}>
          <button type="button" data-testid="thread" data-thread-id={t.thread_id}
            aria-current={t.thread_id === current ? 'true' : undefined} onClick={() => onPick(t.thread_id)}>
            {t.thread_id}
          </button>
        </li>
      ))}
    </ul>
  );
}

function Message({ m, stream }) {
  const regenerate = () => {
    const meta = stream.getMessagesMetadata(m);
    const parent = meta?.firstSeenState?.parent_checkpoint;
    tc.regenerated = { id: m.id, parent: parent ?? null };
    tc.submitted += 1;
    stream.submit(undefined, { ...RUN, checkpoint: parent });
  };
  return (
    <li data-testid="message" data-type={m.type} data-id={m.id}>
      <span data-testid="text">{textOf(m)}</span>
      {m.type === 'ai' && (m.tool_calls ?? []).map((call) => (
        <div key={call.id} data-testid="tool-call" data-call-id={call.id} data-name={call.name}>
          {call.name}({JSON.stringify(call.args)})
        </div>
      ))}
      {m.type === 'tool' && <div data-testid="tool-result" data-call-id={m.tool_call_id} />}
      {m.type === 'ai' && !stream.isLoading && (
        <button type="button" data-testid="regenerate" onClick={regenerate}>Regenerate</button>
      )}
    </li>
  );
}

function App() {
  const [threadId, setThreadId] = useState(null);
  const [version, setVersion] = useState(0);
  const [question, setQuestion] = useState('');
  const client = useMemo(() => new Client({ apiUrl, apiKey: null }), []);
  const stream = useStream({
    client, assistantId, threadId, fetchStateHistory: true,
    onThreadId: (id) => {
      tc.made.push(id);
      setThreadId(id);
      setVersion((v) => v + 1);
    },
    onCreated: (run) => tc.runs.push(run),
    onFinish: () => {
      tc.finished += 1;
      setVersion((v) => v + 1);
    },
    onError: (e) => tc.errors.push(String(e?.stack ?? e)),
  });

  const messages = stream.messages;
  const interrupt = stream.interrupt;
  useEffect(() => {
    tc.state = {
      threadId, isLoading: stream.isLoading, isThreadLoading: stream.isThreadLoading,
      messages, values: stream.values, interrupt: interrupt ?? null, branch: stream.branch,
      error: stream.error == null ? null : String(stream.error),
      meta: messages.map((m) => {
        const meta = stream.getMessagesMetadata(m);
        return { id: m.id, branch: meta?.branch ?? null, branchOptions: meta?.branchOptions ?? null,
          checkpoint: meta?.firstSeenState?.checkpoint?.checkpoint_id ?? null,
          parent: meta?.firstSeenState?.parent_checkpoint?.checkpoint_id ?? null };
      }),
    };
  });

  const send = (e) => {
    e.preventDefault();
    const text = question.trim();
    if (!text) return;
    setQuestion('');
    const human = { id: crypto.randomUUID(), type: 'human', content: [{ type: 'text', text }] };
    tc.submitted += 1;
    stream.submit({ messages: [human] }, {
      ...RUN,
      optimisticValues: (prev) => ({ ...prev, messages: [...(prev.messages ?? []), human] }),
    });
  };
  const hitl = hitlRequest(interrupt?.value);
  // Approve is offered where every action's review config allows it.
  const approvable = !hitl || hitl.action_requests.every((a) => hitl.review_configs
    .find((c) => c?.action_name === a.name)?.allowed_decisions?.includes('approve'));
  const approve = () => {
    tc.submitted += 1;
    // The middleware takes one decision per action requested.
    const resume = hitl ? { decisions: hitl.action_requests.map(() => ({ type: 'approve' })) } : 'yes';
    stream.submit(undefined, { ...RUN, command: { resume } });
  };

  return (
    <main>
      <nav>
        <button type="button" data-testid="new-thread" onClick={() => setThreadId(null)}>New thread</button>
        <Threads client={client} current={threadId} onPick={setThreadId} version={version} />
      </nav>
      <section>
        <p data-testid="status" data-loading={String(stream.isLoading)} data-thread-id={threadId ?? ''}>
          {stream.isLoading ? 'streaming' : 'idle'}
        </p>
        <ol data-testid="messages">
          {messages.map((m, i) => <Message key={m.id ?? i} m={m} stream={stream} />)}
        </ol>
        {interrupt && interrupt.value !== undefined && (
          <div data-testid="interrupt">
            <pre data-testid="interrupt-value">{JSON.stringify(interrupt.value)}</pre>
            {hitl && hitl.action_requests.map((a, i) => (
              <div key={i} data-testid="action-request" data-name={a.name}>
                {a.description ?? a.name}: {a.name}({JSON.stringify(a.args)})
              </div>
            ))}
            {approvable && <button type="button" data-testid="approve" onClick={approve}>Approve</button>}
          </div>
        )}
        {stream.error != null && <p data-testid="error">{String(stream.error)}</p>}
        <form onSubmit={send}>
          <input data-testid="question" value={question} onChange={(e) => setQuestion(e.target.value)} />
          <button type="submit" data-testid="send" disabled={stream.isLoading}>Send</button>
        </form>
      </section>
    </main>
  );
}

// Every distinct text each rendered message shows, in order (from the DOM).
new MutationObserver(() => {
  for (const li of document.querySelectorAll('[data-testid="message"]')) {
    const id = li.dataset.id;
    const text = li.querySelector('[data-testid="text"]')?.textContent ?? '';
    const seen = (tc.seen[id] ??= []);
    if (seen.at(-1) !== text) seen.push(text);
  }
}).observe(document.body, { subtree: true, childList: true, characterData: true });

createRoot(document.getElementById('root')).render(<App />);
