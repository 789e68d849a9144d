/**
 * The walks over a value, each iterative: deep values never overflow the stack, brackets
 * inside strings (escaped quotes included) never count as nesting.
 */
import { describe, expect, it } from 'vitest';
import { findUnstorable, jsonDepth, toJsonText, ValueTooDeepError } from '../../../functions/ingest/json-text';

const bytes = (s: string) => Buffer.from(s, 'utf8');

describe('jsonDepth', () => {
  it.each([
    ['{}', 1],
    ['{"a":[{"b":[]}]}', 4],
    ['{"a":"[[[[{{{{"}', 1],
    ['{"a":"quote \\" then [[[[ still inside"}', 1],
    ['{"a":"ends with a backslash \\\\"}', 1],
    ['{"a":"\\\\\\"[[["}', 1],
    ['"unterminated [[[[', 0],
  ])('%s → %i', (text, depth) => {
    expect(jsonDepth(bytes(text), 100)).toBe(depth);
  });

  it('stops counting at the limit, on 100,000 levels, without recursion', () => {
    const deep = bytes('['.repeat(100_000) + ']'.repeat(100_000));
    expect(jsonDepth(deep, 65)).toBe(65);
    expect(jsonDepth(deep, 1_000_000)).toBe(100_000);
  });
});

describe('findUnstorable', () => {
  it('finds a NUL 100,000 levels down, naming its path, without overflowing the stack', () => {
    let value: unknown = 'a\u0000b';
    for (let i = 0; i < 100_000; i++) value = [value];
    const path = findUnstorable(value);
    expect(path).toBe('[0]'.repeat(100_000));
  });

  it('finds the first offender in document order, member names included', () => {
    expect(findUnstorable({ a: 'ok', b: ['x', 'y\u0000'], c: '\ud800' })).toBe('b[1]');
    expect(findUnstorable({ a: { 'k\u0000': 1 } })).toBe('a.<name> (member name)');
    expect(findUnstorable({ a: ['fine', { b: 'fine' }] })).toBeNull();
  });
});

describe('toJsonText', () => {
  it('writes bigints and bytes exactly, NaN as text, member order kept', () => {
    expect(toJsonText({ z: 2n ** 64n + 1n, a: new Uint8Array([1, 2, 3]), n: Number.NaN, s: 'é"', l: [1, null, true] }, 8)).toBe(
      '{"z":18446744073709551617,"a":"AQID","n":"NaN","s":"é\\"","l":[1,null,true]}',
    );
  });

  it('refuses a value deeper than its limit with ValueTooDeepError (a recursive schema), iteratively', () => {
    let value: unknown = 1;
    for (let i = 0; i < 100_000; i++) value = { next: value };
    expect(() => toJsonText(value, 64)).toThrow(ValueTooDeepError);
    expect(toJsonText({ a: { b: 1 } }, 2)).toBe('{"a":{"b":1}}');
  });
});
