/**
 * FNV-1a 64 by its definition, a BigInt multiply per UTF-16 code unit: the reference that
 * worker/webhooks/core/event-id.ts (two 32-bit halves) is checked against in its unit test and
 * timed against in bench:event-id.
 */

/** The FNV-1a 64 offset basis. */
export const FNV64_BASIS = 0xcbf29ce484222325n;

/** FNV-1a 64 of `text`'s UTF-16 code units from `basis`. */
export function fnv1a64ByDefinition(text: string, basis = FNV64_BASIS): bigint {
  let h = basis;
  for (let i = 0; i < text.length; i++) h = ((h ^ BigInt(text.charCodeAt(i))) * 0x100000001b3n) & 0xffffffffffffffffn;
  return h;
}
