import { describe, expect, it } from 'vitest';
import { DEFAULT_OPTIONS, OptionsError, parseLocalArgs } from '../../../tools/local/options';

describe('parseLocalArgs', () => {
  it('returns the defaults with no arguments', () => {
    expect(parseLocalArgs([])).toEqual({ help: false, options: DEFAULT_OPTIONS });
  });

  it('parses every kind of flag', () => {
    const parsed = parseLocalArgs(['--events', '200', '--seed', '7', '--poison-rate', '0.2', '--keep', '--log-level', 'info', '--report', 'out/run.html']);
    expect(parsed).toEqual({
      help: false,
      options: { ...DEFAULT_OPTIONS, events: 200, seed: 7, poisonRate: 0.2, keep: true, logLevel: 'INFO', reportFile: 'out/run.html' },
    });
  });

  it('answers --help and -h', () => {
    expect(parseLocalArgs(['--help'])).toEqual({ help: true });
    expect(parseLocalArgs(['-h'])).toEqual({ help: true });
  });

  it.each([
    [['--events', '0'], /--events 0/],
    [['--duplicate-rate', '1.5'], /--duplicate-rate 1.5/],
    [['--partitions', 'four'], /--partitions four/],
    [['--evnts', '10'], /evnts/],
  ])('refuses %j naming the flag', (argv, message) => {
    expect(() => parseLocalArgs(argv)).toThrow(OptionsError);
    expect(() => parseLocalArgs(argv)).toThrow(message);
  });
});
