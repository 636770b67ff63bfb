// The JavaScript example graph (src/worker/graphs/agent.js) as a langgraph.json export: its
// StateGraph, which the JavaScript worker compiles once with its checkpointer, as it serves the
// example by default (exporting builder() instead would make it a factory, built for every run).
import { builder } from '../../../src/worker/graphs/agent.js';

export const graph = builder();
