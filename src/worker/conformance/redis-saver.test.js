// The conformance suite: validate() runs its default specs (put, putWrites,
// getTuple, list, deleteThread); deltaChannelHistoryTests is the opt-in spec
// the in-repo LangGraph savers also run (getDeltaChannelHistory through
// getTuple and parentConfig, writes in LangGraph's order).
import { validate, deltaChannelHistoryTests } from '@langchain/langgraph-checkpoint-validation';
import initializer from './initializer.js';

validate(initializer);
deltaChannelHistoryTests(initializer);
