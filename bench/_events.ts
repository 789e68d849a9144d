/** The events the benchmarks store: regulatory-case envelopes with 1 KiB payloads. */
import { randomBytes } from 'node:crypto';
import { caseAccepted } from '../tools/case-events';

export type Envelope = Record<string, unknown>;

/** A 1 KiB JSON payload with a random filler (real payloads are not one repeated character). */
export function filler(payload: Record<string, unknown>): Record<string, unknown> {
  const room = 1024 - JSON.stringify({ ...payload, note: '' }).length;
  return { ...payload, note: randomBytes(room).toString('base64').slice(0, room) };
}

/** A case's acceptance with a 1 KiB payload, its event id unique to the run `run`. */
export function accepted(run: string, n: number, caseId = `case_${n}`): Envelope {
  const envelope = caseAccepted(caseId, `evt_${run}_${randomBytes(8).toString('hex')}`);
  return { ...envelope, payload: filler(envelope.payload) };
}
