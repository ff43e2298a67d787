/**
 * A deliberate slowdown, for checking that the CPU guard notices one (bench/guard.ts): loaded with
 * `node --import`, it spends BENCH_SLOWDOWN (0.2: a fifth) more CPU time on the main thread than the
 * process spent since its last turn, every 5 ms, so every request costs that much more whatever it is.
 */
const share = Number(process.env.BENCH_SLOWDOWN ?? 0.2);
const used = () => {
  const { user, system } = process.cpuUsage();
  return user + system;
};
let last = used();
setInterval(() => {
  const owed = (used() - last) * share;
  const until = used() + owed;
  while (used() < until);
  last = used();
}, 5).unref();
