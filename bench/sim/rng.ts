/*
 * NAME
 *   rng - the simulator's seeded pseudo-random numbers
 * DESCRIPTION
 *   createRng() returns a small-state generator (the sfc32 construction: three 32-bit words
 *   and a counter) seeded from one integer through a splitmix-style scrambler, so that
 *   neighbouring seeds give unrelated streams. Every draw in the simulator comes from such a
 *   stream; nothing uses Math.random, so a run is reproducible for a given seed.
 *   deriveSeed() gives independent sub-streams of one seed (arrivals vs service times), so
 *   two runs that differ only in a scheduler parameter see exactly the same arrivals.
 *   uniformBetween() and exponentialWithMean() are the two distributions the models use.
 * INVARIANTS
 *   next() is in [0, 1). The same seed always yields the same sequence.
 * ERRORS
 *   None.
 */

/** A stream of pseudo-random numbers in [0, 1). */
export interface Rng {
  next(): number;
}

/** Scrambles a 32-bit value (splitmix32 finaliser); used only for seeding. */
function scramble(x: number): number {
  let z = (x + 0x9e3779b9) | 0;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
  return (z ^ (z >>> 16)) >>> 0;
}

/** A seeded generator (sfc32 construction). */
export function createRng(seed: number): Rng {
  let a = scramble(seed);
  let b = scramble(a);
  let c = scramble(b);
  let d = 1;
  const next = (): number => {
    const t = (((a + b) | 0) + d) | 0;
    d = (d + 1) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    c = (c + t) | 0;
    return (t >>> 0) / 4294967296;
  };
  // The first outputs of a freshly seeded sfc32 are weakly mixed; discard them.
  for (let i = 0; i < 16; i++) next();
  return { next };
}

/** The seed of sub-stream `stream` of `seed` (e.g. 1 = arrivals, 2 = service times). */
export function deriveSeed(seed: number, stream: number): number {
  return scramble((Math.imul(seed | 0, 0x27d4eb2d) ^ scramble(stream)) | 0);
}

/** A uniform draw in [lo, hi). */
export function uniformBetween(rng: Rng, lo: number, hi: number): number {
  return lo + (hi - lo) * rng.next();
}

/** An exponential draw with the given mean (inter-arrival time of a Poisson process). */
export function exponentialWithMean(rng: Rng, mean: number): number {
  return -mean * Math.log(1 - rng.next());
}
