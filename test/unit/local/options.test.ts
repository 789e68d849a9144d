import { describe, expect, it } from 'vitest';
import { DEFAULT_OPTIONS, OptionsError, parseLocalArgs } from '../../../tools/local/options';

describe('parseLocalArgs', () => {
  it('returns the defaults with no arguments', () => {
    expect(parseLocalArgs([])).toEqual({ help: false, options: DEFAULT_OPTIONS });
  });

  it('parses every kind of flag', () => {
    const parsed = parseLocalArgs([
      '--events',
      '200',
      '--seed',
      '7',
      '--poison-rate',
      '0.2',
      '--keep',
      '--log-level',
      'info',
      '--report',
      'out/run.html',
    ]);
    expect(parsed).toEqual({
      help: false,
      options: { ...DEFAULT_OPTIONS, events: 200, seed: 7, poisonRate: 0.2, keep: true, logLevel: 'INFO', reportFile: 'out/run.html' },
    });
  });

  it('--rate and --duration: a steady load of rate × duration events, at the production cadence unless told otherwise', () => {
    expect(parseLocalArgs(['--rate', '300', '--duration', '60'])).toEqual({
      help: false,
      options: {
        ...DEFAULT_OPTIONS,
        rate: 300,
        durationSeconds: 60,
        events: 18_000,
        tickMs: 60_000,
        batchingWindowMs: 1_000,
        timeoutSeconds: 240,
      },
    });
    expect(
      parseLocalArgs(['--rate', '50', '--duration', '4', '--tick-ms', '500', '--batching-window-ms', '0', '--timeout', '30']),
    ).toMatchObject({
      options: { events: 200, tickMs: 500, batchingWindowMs: 0, timeoutSeconds: 30 },
    });
  });

  it('--no-wake-ups: the schedule alone starts the workers', () => {
    expect(parseLocalArgs(['--no-wake-ups'])).toEqual({ help: false, options: { ...DEFAULT_OPTIONS, wakeUps: false } });
  });

  it.each([
    [['--rate', '300', '--events', '100'], /--events and --rate both set the number of events/],
    [['--duration', '60'], /--duration needs --rate/],
    [['--rate', '0'], /--rate 0/],
    [['--rate', '100000', '--duration', '3600'], /more than 1,000,000/],
  ])('refuses the steady-load flags %j', (argv, message) => {
    expect(() => parseLocalArgs(argv)).toThrow(OptionsError);
    expect(() => parseLocalArgs(argv)).toThrow(message);
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
