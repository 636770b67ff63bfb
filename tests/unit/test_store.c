/* Unit tests: store.c (the Redis contract) and tree.c (the agent tree). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"
#include "tree.h"
#include "util.h"

/* The argv of c joined by spaces. */
static const char *words(const struct tc_store_cmd *c)
{
	static char buf[1024];
	buf[0] = '\0';
	for (int i = 0; c->argv[i]; i++) {
		assert_true(i < c->argc);
		snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%s%s", i ? " " : "", c->argv[i]);
	}
	assert_null(c->argv[c->argc]);
	return buf;
}

static void keys_and_channels(void **state)
{
	char k[TC_STORE_KEY_MAX], id[TC_THREAD_ID_MAX + 1];
	assert_string_equal(tc_store_key(k, "t1", TC_KEY_EVENTS), "tc:{t1}:events");
	assert_string_equal(tc_store_key(k, "t1", TC_KEY_META), "tc:{t1}:meta");
	assert_string_equal(tc_store_key(k, "t1", TC_KEY_TREE), "tc:{t1}:tree");
	assert_string_equal(tc_store_key(k, "t1", TC_KEY_VALUES), "tc:{t1}:values");
	assert_string_equal(tc_store_key(k, "t1", TC_KEY_LIVE), "tc:{t1}:live");
	assert_string_equal(tc_store_key(k, "a.b", TC_KEY_AGENT_CKPTS), "tc:{a.b}:agent:ckpts");
	/* The longest thread id fits. */
	char longest[TC_THREAD_ID_MAX + 1];
	memset(longest, 'x', TC_THREAD_ID_MAX);
	longest[TC_THREAD_ID_MAX] = '\0';
	tc_store_key(k, longest, TC_KEY_AGENT_CKPTS);
	assert_int_equal(strlen(k), TC_THREAD_ID_MAX + 17);

	char ch[TC_STORE_REPLY_MAX];
	assert_string_equal(tc_store_reply_channel(ch, "0123456789abcdef"), "tc:reply:0123456789abcdef");

	assert_int_equal(tc_store_live_thread("tc:{t1}:live", 12, id), 0);
	assert_string_equal(id, "t1");
	const char *bad[] = { "tc:{}:live", "tc:{t1}:meta", "tc:reply:abc", "tc:{t1}:liv", "x" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(tc_store_live_thread(bad[i], strlen(bad[i]), id), -1);
}

static void numbers(void **state)
{
	uint64_t v;
	assert_int_equal(tc_store_u64("42", 2, &v), 0);
	assert_int_equal(v, 42);
	assert_int_equal(tc_store_u64("9007199254740991", 16, &v), 0);
	assert_int_equal(tc_store_u64("9007199254740992", 16, &v), -1);
	assert_int_equal(tc_store_u64("", 0, &v), -1);
	assert_int_equal(tc_store_u64("4x", 2, &v), -1);
	assert_int_equal(tc_store_u64("-4", 2, &v), -1);
}

static void command_builders(void **state)
{
	struct tc_store_cmd c;
	tc_store_read_meta(&c, "t1");
	assert_string_equal(words(&c), "HMGET tc:{t1}:meta seq epoch entry_max entry_seq run_seq run_id run_status");
	tc_store_read_head(&c, "t1");
	assert_string_equal(words(&c), "HMGET tc:{t1}:meta seq epoch");
	tc_store_read_first(&c, "t1");
	assert_string_equal(words(&c), "XRANGE tc:{t1}:events - + COUNT 1");
	tc_store_read_index(&c, "t1", TC_KEY_TREE);
	assert_string_equal(words(&c), "HGETALL tc:{t1}:tree");
	tc_store_append(&c, "t1", "{}", NULL);
	assert_string_equal(words(&c), "FCALL threadcast_append 1 t1 {}");
	tc_store_append(&c, "t1", "{}", &(struct tc_store_append_opts){ .ttl = "60", .run = "r1" });
	assert_string_equal(words(&c), "FCALL threadcast_append 1 t1 {} TTL 60 RUN r1");
	tc_store_submit(&c, &(struct tc_store_command){ "t1", "run.start", "{}", "i:1", "tc:reply:i", "99", "agent" });
	assert_string_equal(words(&c),
			    "FCALL threadcast_submit 4 tc:commands {tc:commands}:w:* "
			    "{tc:commands}:w:agent {tc:commands}:a:agent agent t1 run.start {} i:1 tc:reply:i 99");
	tc_store_register(&c, "*", "w1", 10000);
	assert_string_equal(words(&c),
			    "FCALL threadcast_register 2 {tc:commands}:w:* {tc:commands}:assistants * w1 10000");
	tc_store_read_route(&c, "t1");
	assert_string_equal(words(&c), "HMGET tc:{t1}:meta seq epoch assistant_id");
	tc_store_read_rest_run(&c, "r-1");
	assert_string_equal(
		words(&c),
		"HMGET {tc:commands}:r:r-1 thread_id after_seq kwargs status assistant_id graph_id language");
	tc_store_rest_call(&c, false, "runs.get", "{}");
	assert_string_equal(words(&c), "FCALL threadcast_rest 1 {tc:commands} runs.get {}");
	tc_store_rest_call(&c, true, "store.get", "{}");
	assert_string_equal(words(&c), "FCALL threadcast_store 1 {tc:store} store.get {}");
	assert_true(tc_store_assistant_valid("agent", 5));
	assert_false(tc_store_assistant_valid("a b", 3));
	assert_false(tc_store_assistant_valid("", 0));
	tc_store_worker_read(&c, "w1", 32, 500);
	assert_string_equal(words(&c), "XREADGROUP GROUP workers w1 COUNT 32 BLOCK 500 STREAMS tc:commands >");
	tc_store_worker_claim(&c, "w1", 30000, 32);
	assert_string_equal(words(&c), "XAUTOCLAIM tc:commands workers w1 30000 0-0 COUNT 32");
	tc_store_worker_ack(&c, "1-0");
	assert_string_equal(words(&c), "XACK tc:commands workers 1-0");
}

static redisReply *rstr(const char *s)
{
	redisReply *r = tc_xcalloc(1, sizeof(*r));
	r->type = REDIS_REPLY_STRING;
	r->str = tc_xstrdup(s);
	r->len = strlen(s);
	return r;
}

static redisReply *rarr(size_t n, redisReply **items)
{
	redisReply *r = tc_xcalloc(1, sizeof(*r));
	r->type = REDIS_REPLY_ARRAY;
	r->elements = n;
	r->element = tc_xcalloc(n + 1, sizeof(*r->element));
	if (n)
		memcpy(r->element, items, n * sizeof(*items));
	return r;
}

static void replies(void **state)
{
	struct tc_store_meta m;
	redisReply *r = rarr(7, (redisReply *[]){ rstr("12"), rstr("e1"), rstr("300"), rstr("12"), rstr("5"),
						  rstr("run-5"), rstr("running") });
	assert_int_equal(tc_store_meta_parse(r, &m), 0);
	assert_int_equal(m.seq, 12);
	assert_string_equal(m.epoch, "e1");
	assert_int_equal(m.run_seq, 5);
	assert_int_equal(m.entry_max, 300);
	assert_int_equal(m.entry_seq, 12);
	assert_int_equal(m.run_id_len, 5);
	assert_false(m.run_over);
	freeReplyObject(r);
	const char *over[] = { "completed", "failed", "interrupted" };
	for (size_t i = 0; i < 3; i++) {
		r = rarr(7, (redisReply *[]){ rstr("12"), rstr("e1"), rstr("300"), rstr("12"), rstr("5"), rstr("run-5"),
					      rstr(over[i]) });
		assert_int_equal(tc_store_meta_parse(r, &m), 0);
		assert_true(m.run_over);
		freeReplyObject(r);
	}
	r = rarr(4, (redisReply *[]){ rstr("12"), rstr("e1"), rstr("5"), rstr("run-5") });
	assert_int_equal(tc_store_meta_parse(r, &m), -1); /* neither read */
	freeReplyObject(r);
	redisReply *nil = tc_xcalloc(1, sizeof(*nil));
	nil->type = REDIS_REPLY_NIL;
	r = rarr(2, (redisReply *[]){ nil, rstr("e1") }); /* a thread without events yet */
	assert_int_equal(tc_store_meta_parse(r, &m), 0);
	assert_int_equal(m.seq, 0);
	assert_int_equal(m.entry_max, 0);
	assert_null(m.run_id);
	freeReplyObject(r);
	/* entry_max is known only when it and entry_seq are all digits: a bound read wrong could let reads grow. */
	const char *garbled[] = { "3x", "", "-4", "99999999999999999999" };
	for (size_t i = 0; i < 4; i++) {
		r = rarr(7, (redisReply *[]){ rstr("12"), rstr("e1"), rstr(garbled[i]), rstr("12"), rstr("5"),
					      rstr("run-5"), rstr("running") });
		assert_int_equal(tc_store_meta_parse(r, &m), 0);
		assert_int_equal(m.entry_max, 0);
		freeReplyObject(r);
		r = rarr(7, (redisReply *[]){ rstr("12"), rstr("e1"), rstr("300"), rstr(garbled[i]), rstr("5"),
					      rstr("run-5"), rstr("running") });
		assert_int_equal(tc_store_meta_parse(r, &m), 0);
		assert_int_equal(m.entry_max, 0);
		freeReplyObject(r);
	}
	redisReply *nil3 = tc_xcalloc(1, sizeof(*nil3));
	nil3->type = REDIS_REPLY_NIL;
	r = rarr(7, (redisReply *[]){ rstr("12"), rstr("e1"), rstr("300"), nil3, rstr("5"), rstr("run-5"),
				      rstr("running") });
	assert_int_equal(tc_store_meta_parse(r, &m), 0);
	assert_int_equal(m.entry_max, 0); /* no entry_seq: not known */
	freeReplyObject(r);

	/* A REST run's record, by name. */
	struct tc_store_rest_run run;
	r = rarr(7, (redisReply *[]){ rstr("t1"), rstr("42"), rstr("{\"input\":null}"), rstr("running"), rstr("a-1"),
				      rstr("agent"), rstr("python") });
	assert_int_equal(tc_store_rest_run_parse(r, &run), 0);
	assert_string_equal(run.thread_id, "t1");
	assert_int_equal(run.thread_id_len, 2);
	assert_int_equal(run.after_seq, 42);
	assert_string_equal(run.kwargs, "{\"input\":null}");
	assert_int_equal(run.kwargs_len, 14);
	assert_string_equal(run.status, "running");
	assert_true(run.active);
	assert_false(run.failed);
	assert_string_equal(run.assistant_id, "a-1");
	assert_string_equal(run.graph_id, "agent");
	assert_int_equal(run.graph_id_len, 5);
	assert_true(run.python);
	freeReplyObject(r);
	const char *status[][3] = { { "pending", "1", "0" },
				    { "success", "0", "0" },
				    { "error", "0", "1" },
				    { "timeout", "0", "1" },
				    { "interrupted", "0", "0" } };
	for (size_t i = 0; i < sizeof(status) / sizeof(status[0]); i++) {
		r = rarr(7, (redisReply *[]){ rstr("t1"), rstr("x"), rstr("{}"), rstr(status[i][0]), rstr("a"),
					      rstr("g"), rstr("javascript") });
		assert_int_equal(tc_store_rest_run_parse(r, &run), 0);
		assert_false(run.python);
		assert_int_equal(run.active, status[i][1][0] == '1');
		assert_int_equal(run.failed, status[i][2][0] == '1');
		assert_int_equal(run.after_seq, 0); /* not a number */
		freeReplyObject(r);
	}
	redisReply *nils[7];
	for (size_t i = 0; i < 7; i++) {
		nils[i] = tc_xcalloc(1, sizeof(*nils[i]));
		nils[i]->type = REDIS_REPLY_NIL;
	}
	r = rarr(7, nils); /* no such run */
	assert_int_equal(tc_store_rest_run_parse(r, &run), 0);
	assert_null(run.thread_id);
	assert_null(run.kwargs);
	assert_null(run.assistant_id);
	assert_null(run.graph_id);
	assert_string_equal(run.status, "");
	assert_false(run.active || run.failed || run.python);
	freeReplyObject(r);
	r = rarr(4, (redisReply *[]){ rstr("t1"), rstr("1"), rstr("{}"), rstr("running") });
	assert_int_equal(tc_store_rest_run_parse(r, &run), -1);
	freeReplyObject(r);
	assert_int_equal(tc_store_rest_run_parse(NULL, &run), -1);

	struct tc_stream_entry e;
	r = rarr(2, (redisReply *[]){ rstr("7-0"),
				      rarr(6, (redisReply *[]){ rstr("m"), rstr("tools"), rstr("n"), rstr("/a"),
								rstr("e"), rstr("{\"x\":1}") }) });
	assert_int_equal(tc_store_entry_parse(r, &e), 0);
	assert_int_equal(e.seq, 7);
	assert_int_equal(e.method_len, 5);
	assert_int_equal(e.ns_len, 2);
	assert_int_equal(e.json_len, 7);
	freeReplyObject(r);
	r = rarr(2, (redisReply *[]){ rstr("7-1"), rarr(0, NULL) }); /* not ours */
	assert_int_equal(tc_store_entry_parse(r, &e), -1);
	freeReplyObject(r);

	struct tc_store_pair pairs[2];
	r = rarr(4, (redisReply *[]){ rstr("/a"), rstr("running\ng"), rstr(""), rstr("started\nagent") });
	assert_int_equal(tc_store_pairs(r, pairs), 2);
	assert_int_equal(pairs[1].key_len, 0);
	assert_int_equal(pairs[0].value_len, 9);
	freeReplyObject(r);
}

static void doorbells(void **state)
{
	struct tc_doorbell d;
	const char *ok = "e1\n42\nmessages\n/a\n{\"method\":\"messages\"}";
	assert_int_equal(tc_store_doorbell_parse(ok, strlen(ok), &d), 0);
	assert_int_equal(d.seq, 42);
	assert_int_equal(d.epoch_len, 2);
	assert_int_equal(d.method_len, 8);
	assert_int_equal(d.ns_len, 2);
	assert_int_equal(d.json_len, 21);
	/* JSON may hold newlines: only the first four split. */
	const char *nl = "e1\n1\nvalues\n\n{\n}";
	assert_int_equal(tc_store_doorbell_parse(nl, strlen(nl), &d), 0);
	assert_int_equal(d.json_len, 3);
	const char *bad[] = { "",
			      "e1\n1\nm\n",
			      "\n1\nm\n\n{}",
			      "e1\n\nm\n\n{}",
			      "e1\n1x\nm\n\n{}",
			      "e1\n1\nm\n\n[]",
			      "e1\n1\nm\n\n{",
			      "0123456789012345678901234567890123456789\n1\nm\n\n{}" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(tc_store_doorbell_parse(bad[i], strlen(bad[i]), &d), -1);
}

static void batch_doorbells(void **state)
{
	struct tc_doorbell_reader r;
	struct tc_doorbell d;
	const char *one = "e1\n42\nmessages\n/a\n{\"x\":1}";
	assert_int_equal(tc_store_doorbell_open(&r, one, strlen(one)), 0);
	assert_int_equal(tc_store_doorbell_next(&r, &d), 1);
	assert_int_equal(d.seq, 42);
	assert_int_equal(tc_store_doorbell_next(&r, &d), 0);

	/* Two events; the second's JSON holds a newline: lengths, not separators. */
	const char *two = "*e1\n7\n2\nmessages\n\n7\n{\"x\":1}tools\n/r\n9\n{\"y\":\"\n\"}";
	assert_int_equal(tc_store_doorbell_open(&r, two, strlen(two)), 0);
	assert_int_equal(tc_store_doorbell_next(&r, &d), 1);
	assert_int_equal(d.seq, 7);
	assert_int_equal(d.method_len, 8);
	assert_int_equal(d.json_len, 7);
	assert_int_equal(d.epoch_len, 2);
	assert_int_equal(tc_store_doorbell_next(&r, &d), 1);
	assert_int_equal(d.seq, 8);
	assert_memory_equal(d.method, "tools", 5);
	assert_memory_equal(d.ns, "/r", 2);
	assert_int_equal(d.json_len, 9);
	assert_int_equal(tc_store_doorbell_next(&r, &d), 0);

	const char *bad[] = {
		"*e1\n7\n2\nmessages\n\n7\n{\"x\":1}",     /* one event short */
		"*e1\n7\n1\nmessages\n\n7\n{\"x\":1}junk", /* left over */
		"*e1\n7\n1\nmessages\n\n70\n{\"x\":1}",    /* longer than the message */
		"*e1\n7\n1\nmessages\n\n7\n[\"x\",1]",     /* not an object */
		"*e-1\n7\n1\nm\n\n2\n{}",                  /* epoch */
		"*e1\n0\n1\nm\n\n2\n{}",                   /* seq 0 */
		"*e1\n7\n0\n",                             /* no events */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = tc_store_doorbell_open(&r, bad[i], strlen(bad[i]));
		if (rc == 0)
			while ((rc = tc_store_doorbell_next(&r, &d)) == 1)
				;
		if (rc != -1)
			fail_msg("accepted bad doorbell %zu", i);
	}
}

static redisReply *rinteger(long long v)
{
	redisReply *r = tc_xcalloc(1, sizeof(*r));
	r->type = REDIS_REPLY_INTEGER;
	r->integer = v;
	return r;
}

/* How a range read is sent: a plain XRANGE where a bound from meta keeps it
 * small enough, else the function. */
static void range_reads(void **state)
{
	struct tc_store_cmd c;
	struct tc_store_range r = { .after = 7, .count = 512 };
	struct tc_store_bound b = { .head = 1000, .entry_max = 400 };

	/* No bound (the hub's fills), or none known (a history begun by an earlier version). */
	tc_store_read_range(&c, "t1", &r, NULL);
	assert_string_equal(words(&c), "FCALL_RO threadcast_range 1 t1 7 0 512 1048576");
	assert_int_equal(r.plain, 0);
	r = (struct tc_store_range){ .after = 0, .through = 9, .count = 3 };
	tc_store_read_range(&c, "t1", &r, &(struct tc_store_bound){ .head = 9 });
	assert_string_equal(words(&c), "FCALL_RO threadcast_range 1 t1 0 9 3 1048576");

	/* Small entries: as many as asked; "to the end" ends at the head meta gave. */
	r = (struct tc_store_range){ .after = 7, .count = 512 };
	tc_store_read_range(&c, "t1", &r, &b);
	assert_string_equal(words(&c), "XRANGE tc:{t1}:events 7-1 1000-0 COUNT 512");
	assert_int_equal(r.plain, 512);
	r = (struct tc_store_range){ .after = 0, .through = 9, .count = 3 };
	tc_store_read_range(&c, "t1", &r, &b);
	assert_string_equal(words(&c), "XRANGE tc:{t1}:events 0-1 9-0 COUNT 3");

	/* Big entries: fewer a read, so that even all at the largest stay within 4 MiB. */
	b.entry_max = 64 * 1024;
	r = (struct tc_store_range){ .after = 7, .count = 512 };
	tc_store_read_range(&c, "t1", &r, &b);
	assert_string_equal(words(&c), "XRANGE tc:{t1}:events 7-1 1000-0 COUNT 64");
	/* ... until that is too few to be worth it: the function's exact bound. */
	b.entry_max = TC_STORE_PLAIN_BYTES / (TC_STORE_PLAIN_MIN - 1);
	tc_store_read_range(&c, "t1", &r, &b);
	assert_string_equal(words(&c), "FCALL_RO threadcast_range 1 t1 7 0 512 1048576");
	/* ... unless it is all the read asks for. */
	r = (struct tc_store_range){ .after = 7, .through = 9, .count = 2 };
	tc_store_read_range(&c, "t1", &r, &b);
	assert_string_equal(words(&c), "XRANGE tc:{t1}:events 7-1 9-0 COUNT 2");
	b.entry_max = 16 << 20;
	r = (struct tc_store_range){ .after = 7, .through = 9, .count = 2 };
	tc_store_read_range(&c, "t1", &r, &b);
	assert_string_equal(words(&c), "FCALL_RO threadcast_range 1 t1 7 9 2 1048576");

	/* Past the head meta gave, or through a seq beyond it: what the entries are is not known. */
	b.entry_max = 400;
	r = (struct tc_store_range){ .after = 1000, .count = 512 };
	tc_store_read_range(&c, "t1", &r, &b);
	assert_string_equal(words(&c), "FCALL_RO threadcast_range 1 t1 1000 0 512 1048576");
	r = (struct tc_store_range){ .after = 7, .through = 1001, .count = 512 };
	tc_store_read_range(&c, "t1", &r, &b);
	assert_string_equal(words(&c), "FCALL_RO threadcast_range 1 t1 7 1001 512 1048576");
}

/* A plain read's reply is the entries: more may follow when it is a full COUNT. */
static void plain_range_replies(void **state)
{
	const redisReply *got;
	bool more = true;
	struct tc_store_range plain = { .after = 7, .count = 512, .plain = 2 };
	redisReply *r = rarr(1, (redisReply *[]){ rarr(0, NULL) });
	assert_int_equal(tc_store_range_parse(r, &plain, &got, &more), 0);
	assert_ptr_equal(got, r);
	assert_false(more);
	freeReplyObject(r);
	r = rarr(2, (redisReply *[]){ rarr(0, NULL), rarr(0, NULL) });
	assert_int_equal(tc_store_range_parse(r, &plain, &got, &more), 0);
	assert_true(more);
	freeReplyObject(r);
	r = rstr("ERR");
	assert_int_equal(tc_store_range_parse(r, &plain, &got, &more), -1);
	freeReplyObject(r);
}

/* A threadcast_range reply (of a read sent so, or with no bound: NULL): [entries, more]; anything else is refused. */
static void range_replies(void **state)
{
	const struct tc_store_range by_function = { .after = 7, .count = 512 };
	const redisReply *got;
	bool more = false;
	redisReply *r = rarr(2, (redisReply *[]){ rarr(1, (redisReply *[]){ rstr("x") }), rinteger(1) });
	assert_int_equal(tc_store_range_parse(r, NULL, &got, &more), 0);
	assert_int_equal(got->elements, 1);
	assert_true(more);
	more = false;
	assert_int_equal(tc_store_range_parse(r, &by_function, &got, &more), 0);
	assert_int_equal(got->elements, 1);
	assert_true(more);
	freeReplyObject(r);
	r = rarr(2, (redisReply *[]){ rarr(0, NULL), rinteger(0) });
	assert_int_equal(tc_store_range_parse(r, &by_function, &got, &more), 0);
	assert_false(more);
	freeReplyObject(r);
	redisReply *bad[] = { rarr(0, NULL), rarr(1, (redisReply *[]){ rarr(0, NULL) }),
			      rarr(2, (redisReply *[]){ rinteger(1), rinteger(1) }),
			      rarr(2, (redisReply *[]){ rarr(0, NULL), rstr("1") }), rstr("ERR") };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (tc_store_range_parse(bad[i], i % 2 ? NULL : &by_function, &got, &more) != -1)
			fail_msg("accepted range reply %zu", i);
		freeReplyObject(bad[i]);
	}
}

/* A thin doorbell names only the call's last seq: its events are read from the stream. */
static void thin_doorbells(void **state)
{
	struct tc_doorbell_reader r;
	struct tc_doorbell d;
	const char *thin = "#e1\n9\n";
	assert_int_equal(tc_store_doorbell_open(&r, thin, strlen(thin)), 0);
	assert_int_equal(tc_store_doorbell_next(&r, &d), 1);
	assert_int_equal(d.seq, 9);
	assert_null(d.json);
	assert_memory_equal(d.epoch, "e1", 2);
	assert_int_equal(d.epoch_len, 2);
	assert_int_equal(tc_store_doorbell_next(&r, &d), 0);

	const char *bad[] = { "#e1\n9", "#e1\n0\n", "#e-1\n9\n", "#e1\n9\nx", "#\n9\n", "#e1\nx\n" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (tc_store_doorbell_open(&r, bad[i], strlen(bad[i])) != -1)
			fail_msg("accepted bad thin doorbell %zu", i);
}

static void index_values(void **state)
{
	uint64_t seq;
	const char *json;
	size_t len;
	assert_int_equal(tc_store_values_parse("9\n{\"a\":1}", 9, &seq, &json, &len), 0);
	assert_int_equal(seq, 9);
	assert_int_equal(len, 7);
	assert_int_equal(tc_store_values_parse("0\n{}", 4, &seq, &json, &len), -1);
	assert_int_equal(tc_store_values_parse("9{}", 3, &seq, &json, &len), -1);
	assert_int_equal(tc_store_values_parse("9\nx", 3, &seq, &json, &len), -1);

	struct tc_tree_value v;
	tc_store_tree_parse("running\nresearcher", 18, &v);
	assert_int_equal(v.status_len, 7);
	assert_int_equal(v.graph_len, 10);
	tc_store_tree_parse("completed", 9, &v);
	assert_int_equal(v.status_len, 9);
	assert_int_equal(v.graph_len, 0);
}

static void agent_tree(void **state)
{
	struct tc_store_pair e[] = {
		{ "/b", "running\nb", 2, 9 },    { "/a/x", "started\nax", 4, 10 }, { "", "running\nagent", 0, 13 },
		{ "/a", "completed\na", 2, 11 }, { "/ab", "failed", 3, 6 },
	};
	tc_tree_sort(e, 5);
	cJSON *t = tc_tree_build(e, 5);
	char *s = cJSON_PrintUnformatted(t);
	assert_string_equal(s, "{\"namespace\":[],\"status\":\"running\",\"graphName\":\"agent\",\"children\":["
			       "{\"namespace\":[\"a\"],\"status\":\"completed\",\"graphName\":\"a\",\"children\":["
			       "{\"namespace\":[\"a\",\"x\"],\"status\":\"started\",\"graphName\":\"ax\"}]},"
			       "{\"namespace\":[\"ab\"],\"status\":\"failed\",\"graphName\":\"\"},"
			       "{\"namespace\":[\"b\"],\"status\":\"running\",\"graphName\":\"b\"}]}");
	free(s);
	cJSON_Delete(t);
	cJSON *ns = tc_tree_namespaces(e, 5);
	assert_int_equal(cJSON_GetArraySize(ns), 5);
	s = cJSON_PrintUnformatted(cJSON_GetArrayItem(ns, 0));
	assert_string_equal(s, "{\"namespace\":[],\"status\":\"running\"}");
	free(s);
	cJSON_Delete(ns);
	/* No root: no run. */
	assert_null(tc_tree_build(e + 1, 4));
}

/* The libraries of a text tc_redis_new() loads, one by one. */
static void function_libraries(void **state)
{
	static const char src[] = "#!lua name=a\nlocal x = '#!lua'\n#!lua name=b\n-- b\n#!lua name=c";
	const char *lib;
	size_t off = 0, len;
	assert_int_equal(tc_store_library_next(src, sizeof(src) - 1, &off, &lib, &len), 1);
	assert_int_equal(len, 31);
	assert_memory_equal(lib, "#!lua name=a\nlocal x = '#!lua'\n", len);
	assert_int_equal(tc_store_library_next(src, sizeof(src) - 1, &off, &lib, &len), 1);
	assert_memory_equal(lib, "#!lua name=b\n-- b\n", len);
	assert_int_equal(tc_store_library_next(src, sizeof(src) - 1, &off, &lib, &len), 1);
	assert_int_equal(len, 12);
	assert_memory_equal(lib, "#!lua name=c", len);
	assert_int_equal(tc_store_library_next(src, sizeof(src) - 1, &off, &lib, &len), 0);
	/* One library is the whole text; nothing is none. */
	off = 0;
	assert_int_equal(tc_store_library_next(src, 13, &off, &lib, &len), 1);
	assert_int_equal(len, 13);
	assert_int_equal(tc_store_library_next(src, 13, &off, &lib, &len), 0);
	off = 0;
	assert_int_equal(tc_store_library_next("", 0, &off, &lib, &len), 0);
}

int main(void)
{
	tc_cjson_init();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(keys_and_channels),  cmocka_unit_test(numbers),
		cmocka_unit_test(command_builders),   cmocka_unit_test(replies),
		cmocka_unit_test(doorbells),          cmocka_unit_test(batch_doorbells),
		cmocka_unit_test(thin_doorbells),     cmocka_unit_test(range_replies),
		cmocka_unit_test(range_reads),        cmocka_unit_test(plain_range_replies),
		cmocka_unit_test(index_values),       cmocka_unit_test(agent_tree),
		cmocka_unit_test(function_libraries),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
