/**
 * Seeded randomness for the local run. Everything the run decides at random — the stream,
 * the fault plan, the mapping's redeliveries — comes from here, so one seed gives one run.
 *
 * Two kinds: a sequential generator (the stream is generated in one pass, in order) and a
 * keyed draw, `chance(seed, key…)`, whose answer depends only on its key. The mapping uses
 * the keyed draw ("the 3rd delivery of partition 5 for case-sla") so its decisions do not
 * depend on the order in which concurrent deliveries happen to run.
 */

/** mulberry32: small, fast, good enough for test data; not for anything secret. */
export function createRandom(seed: number): Random {
  let state = seed >>> 0;
  const next = (): number => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (min, max) => min + Math.floor(next() * (max - min + 1)),
    chance: (p) => p > 0 && next() < p,
    pick: (items) => {
      if (items.length === 0) throw new RangeError('pick from an empty list');
      return items[Math.floor(next() * items.length)]!;
    },
    uuid: () => {
      const hex = Array.from({ length: 32 }, () => Math.floor(next() * 16).toString(16));
      hex[12] = '4';
      hex[16] = ((Math.floor(next() * 4) & 0x3) | 0x8).toString(16);
      const s = hex.join('');
      return `${s.slice(0, 8)}-${s.slice(8, 12)}-${s.slice(12, 16)}-${s.slice(16, 20)}-${s.slice(20)}`;
    },
  };
}

export interface Random {
  /** Uniform in [0, 1). */
  next(): number;
  /** Uniform integer in [min, max], both included. */
  int(min: number, max: number): number;
  /** True with probability p. */
  chance(p: number): boolean;
  pick<T>(items: readonly T[]): T;
  /** A version-4-shaped UUID drawn from this generator (deterministic, unlike crypto's). */
  uuid(): string;
}

/** FNV-1a over the key's parts: a stable 32-bit hash. */
export function hash32(...parts: (string | number)[]): number {
  let h = 0x811c9dc5;
  for (const part of parts) {
    const s = `${String(part)}\u001f`;
    for (let i = 0; i < s.length; i++) {
      h ^= s.charCodeAt(i);
      h = Math.imul(h, 0x01000193);
    }
  }
  return h >>> 0;
}

/** A uniform draw in [0, 1) that depends only on the seed and the key. */
export function keyedDraw(seed: number, ...key: (string | number)[]): number {
  return createRandom(hash32(seed, ...key)).next();
}

/** True with probability p, decided by the seed and the key alone. */
export function keyedChance(p: number, seed: number, ...key: (string | number)[]): boolean {
  return p > 0 && keyedDraw(seed, ...key) < p;
}
