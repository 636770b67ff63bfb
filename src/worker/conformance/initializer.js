// CheckpointerTestInitializer for the conformance suite (the default export,
// as the suite's CLI would want it; 1.1.1's CLI is broken, see README.md).
// The suite keeps one checkpointer alive at a time and requires each to
// start empty, so every createCheckpointer() flushes the database: point
// TC_CKPT_REDIS_URL at a throwaway Redis (or database) only.
//
// TC_CKPT_SABOTAGE=drop-writes hands the suite a saver whose putWrites stores
// nothing; the integration test uses it to check that a broken saver fails.
import { Redis } from 'ioredis';
import { RedisSaver } from '../checkpoint.js';

class DropWritesSaver extends RedisSaver {
  async putWrites() {}
}

let client;

export default {
  checkpointerName: '@threadcast/langgraph-worker RedisSaver',

  async beforeAll() {
    const url = process.env.TC_CKPT_REDIS_URL;
    if (!url) throw new Error('TC_CKPT_REDIS_URL is not set: the conformance suite needs a throwaway Redis');
    client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await client.connect();
  },

  async afterAll() {
    await client?.quit();
  },

  async createCheckpointer() {
    await client.flushdb();
    const Saver = process.env.TC_CKPT_SABOTAGE === 'drop-writes' ? DropWritesSaver : RedisSaver;
    return new Saver({ client });
  },
};
