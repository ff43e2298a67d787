/**
 * The limiter's model test for longer than CI gives it: `node scripts/limiter-model.ts [SEED] [SECONDS]` runs
 * test/scale-out/limiter-model.test.ts from SEED (random if absent or `-`) with as many sequences as fit in
 * about SECONDS (300 by default; a sequence takes about 2 s). It prints the seed; a failure prints the seed
 * and path that replay it (PETSTORE_MODEL_SEED and PETSTORE_MODEL_PATH).
 */
import { spawnSync } from 'node:child_process';

const [seedArg, secondsArg] = process.argv.slice(2);
const seed = seedArg && seedArg !== '-' ? Number(seedArg) : Math.floor(Math.random() * 2 ** 31);
const seconds = Number(secondsArg ?? 300);
if (!Number.isInteger(seed) || !(seconds > 0)) {
  console.error('usage: node scripts/limiter-model.ts [SEED|-] [SECONDS]');
  process.exit(1);
}
const runs = Math.max(1, Math.round(seconds / 2));
console.log(`limiter model: seed ${seed}, ${runs} sequences`);
const result = spawnSync(process.execPath, ['--test', 'test/scale-out/limiter-model.test.ts'], {
  stdio: 'inherit',
  env: { ...process.env, PETSTORE_MODEL_SEED: String(seed), PETSTORE_MODEL_RUNS: String(runs), PETSTORE_TEST_FILE_TIMEOUT_SECONDS: '0' },
});
process.exit(result.status ?? 1);
