/**
 * The limiter's model tests for longer than CI gives them: `node scripts/limiter-model.ts [SEED] [SECONDS]` runs
 * test/units/limits-model.test.ts (the in-process limiter and the bans, about 100 sequences a second) for a
 * tenth of SECONDS, then test/scale-out/limiter-model.test.ts (the shared limiter on Redis, about 2 s a
 * sequence; it needs PETSTORE_TEST_REDIS_URL's redis-server on PATH) for the rest, both from SEED (random if
 * absent or `-`); SECONDS is 300 by default. It prints the seed; a failure prints the seed and path that
 * replay it (PETSTORE_MODEL_SEED and PETSTORE_MODEL_PATH).
 */
import { spawnSync } from 'node:child_process';

const [seedArg, secondsArg] = process.argv.slice(2);
const seed = seedArg && seedArg !== '-' ? Number(seedArg) : Math.floor(Math.random() * 2 ** 31);
const seconds = Number(secondsArg ?? 300);
if (!Number.isInteger(seed) || !(seconds > 0)) {
  console.error('usage: node scripts/limiter-model.ts [SEED|-] [SECONDS]');
  process.exit(1);
}

const models = [
  { file: 'test/units/limits-model.test.ts', runs: Math.max(1, Math.round(seconds * 10)) },
  { file: 'test/scale-out/limiter-model.test.ts', runs: Math.max(1, Math.round((seconds * 0.9) / 2)) },
];
for (const { file, runs } of models) {
  console.log(`${file}: seed ${seed}, ${runs} sequences`);
  const result = spawnSync(process.execPath, ['--test', file], {
    stdio: 'inherit',
    env: { ...process.env, PETSTORE_MODEL_SEED: String(seed), PETSTORE_MODEL_RUNS: String(runs), PETSTORE_TEST_FILE_TIMEOUT_SECONDS: '0' },
  });
  if (result.status !== 0) process.exit(result.status ?? 1);
}
