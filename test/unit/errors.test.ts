import { describe, expect, it } from 'vitest';
import {
  AggregateVersionGapError,
  classifyError,
  ErrorCodes,
  isInfrastructureError,
  NonRetryableError,
  RetryableError,
} from '../../functions/lib/errors';

/** The shape postgres.js gives a server error. */
function pgError(code: string, message = 'server said no'): Error {
  return Object.assign(new Error(message), { name: 'PostgresError', code, severity: 'ERROR' });
}

describe('classifyError', () => {
  it.each([
    ['40001', 'serialization failure'],
    ['40P01', 'deadlock'],
    ['55P03', 'lock not available'],
    ['57014', 'query canceled'],
    ['57P01', 'admin shutdown'],
    ['53300', 'too many connections'],
    ['08006', 'connection failure'],
  ])('treats SQLSTATE %s (%s) as retryable', (code) => {
    const c = classifyError(pgError(code));
    expect(c.retryable).toBe(true);
    expect(c.sqlState).toBe(code);
  });

  it.each([
    ['22P02', ErrorCodes.DB_DATA_EXCEPTION],
    ['22003', ErrorCodes.DB_DATA_EXCEPTION],
    ['23505', ErrorCodes.DB_INTEGRITY_VIOLATION],
    ['23503', ErrorCodes.DB_INTEGRITY_VIOLATION],
    // An index entry over the B-tree's limit: the same values fail the same way every time.
    ['54000', ErrorCodes.DB_LIMIT_EXCEEDED],
  ])('treats SQLSTATE %s as non-retryable with code %s', (code, expected) => {
    expect(classifyError(pgError(code))).toMatchObject({ retryable: false, code: expected, sqlState: code });
  });

  it('quarantines a missing grant (42501) as DB_PERMISSION, naming what was refused', () => {
    expect(classifyError(pgError('42501', 'permission denied for table sla_obligation'))).toMatchObject({
      retryable: false,
      code: ErrorCodes.DB_PERMISSION,
      sqlState: '42501',
      deniedOn: 'table sla_obligation',
    });
    expect(classifyError(pgError('42501', 'permission denied for schema case_core')).deniedOn).toBe('schema case_core');
    expect(classifyError(pgError('42501', 'must be owner of table x'))).not.toHaveProperty('deniedOn');
  });

  it('decides by SQLSTATE, never by message text', () => {
    expect(classifyError(pgError('22012', 'deadlock detected (not really)')).retryable).toBe(false);
    expect(classifyError(pgError('40P01', 'invalid input syntax (not really)')).retryable).toBe(true);
  });

  it('treats a server-side session termination (57P01, 57P03) as a connection loss', () => {
    for (const code of ['57P01', '57P03']) {
      expect(classifyError(pgError(code))).toMatchObject({ retryable: true, code: ErrorCodes.DB_CONNECTION, sqlState: code });
      expect(isInfrastructureError(pgError(code))).toBe(true);
    }
    expect(classifyError(pgError('57014')).code).toBe(ErrorCodes.DB_TRANSIENT);
  });

  it('treats connection errors from postgres.js and sockets as retryable', () => {
    for (const code of ['CONNECTION_CLOSED', 'CONNECT_TIMEOUT', 'ECONNREFUSED', 'ECONNRESET']) {
      const error = Object.assign(new Error('x'), { code });
      expect(classifyError(error)).toMatchObject({ retryable: true, code: ErrorCodes.DB_CONNECTION });
      expect(isInfrastructureError(error)).toBe(true);
    }
  });

  it('keeps the code of the inbox error classes', () => {
    expect(classifyError(new RetryableError('UPSTREAM_BUSY', 'try later'))).toMatchObject({
      retryable: true,
      code: 'UPSTREAM_BUSY',
    });
    expect(classifyError(new NonRetryableError('BAD_REFERENCE', 'never'))).toMatchObject({
      retryable: false,
      code: 'BAD_REFERENCE',
    });
    expect(classifyError(new AggregateVersionGapError(4, 2))).toMatchObject({
      retryable: true,
      code: ErrorCodes.AGGREGATE_VERSION_GAP,
    });
  });

  it('treats an unknown error as retryable, bounded by the attempt limit', () => {
    expect(classifyError(new TypeError('x is undefined'))).toMatchObject({
      retryable: true,
      code: ErrorCodes.UNEXPECTED_ERROR,
    });
  });

  it('bounds the stored message', () => {
    expect(classifyError(new Error('x'.repeat(5000))).message.length).toBeLessThanOrEqual(501);
  });
});

describe('isInfrastructureError', () => {
  it('is false for data and integrity errors and for plain errors', () => {
    expect(isInfrastructureError(pgError('22P05'))).toBe(false);
    expect(isInfrastructureError(pgError('23505'))).toBe(false);
    expect(isInfrastructureError(new Error('boom'))).toBe(false);
  });
  it('is true for timeouts and resource exhaustion', () => {
    expect(isInfrastructureError(pgError('57014'))).toBe(true);
    expect(isInfrastructureError(pgError('53300'))).toBe(true);
  });
});
