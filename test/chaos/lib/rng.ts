/**
 * A small seeded pseudo-random generator (mulberry32) so every campaign run is reproducible
 * from its printed seed.
 *
 * DESCRIPTION
 *   createRng(seed)      → { next() in [0,1), int(lo, hi) inclusive, pick(list) }.
 */

/** A seeded generator. */
export interface Rng {
  next(): number;
  int(lo: number, hi: number): number;
  pick<T>(list: readonly T[]): T;
}

/** mulberry32 over a 32-bit seed. */
export function createRng(seed: number): Rng {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)),
    pick: (list) => list[Math.floor(next() * list.length)]!,
  };
}
