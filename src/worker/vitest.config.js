// The official checkpointer conformance suite (@langchain/langgraph-checkpoint-
// validation) against RedisSaver: `npm run test:conformance` with
// TC_CKPT_REDIS_URL naming a Redis the suite may flush (the integration test
// tests/integration/checkpoint.test.mjs starts a private redis-server for it).
// The suite's specs use Jest-style globals (describe/it/expect).
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    globals: true,
    include: ['conformance/**/*.test.js'],
    testTimeout: 30000,
    hookTimeout: 30000,
    watch: false,
  },
});
