/** Epoch-based time values of the writer schemas as ISO-8601 text, exact to their unit. */

const floorDiv = (a: bigint, b: bigint) => (a >= 0n ? a / b : -((-a + b - 1n) / b));

/**
 * `units` since the epoch, `perMilli` of them to a millisecond, as ISO-8601 UTC with
 * `digits` fractional digits (3: milliseconds, 6: microseconds, 9: nanoseconds).
 * Throws RangeError beyond year ±275760.
 */
export function isoOf(units: bigint, perMilli: bigint, digits: number): string {
  const ms = floorDiv(units, perMilli);
  const iso = new Date(Number(ms)).toISOString();
  if (perMilli === 1n) return iso;
  const sub = (units - ms * perMilli).toString().padStart(digits - 3, '0');
  return `${iso.slice(0, -1)}${sub}Z`;
}
