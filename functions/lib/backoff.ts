/**
 * The delay a retry schedule gives the `attempt`-th failure (1-based): its entry, then its
 * last entry for every attempt beyond it. The inbox's retry policy and the relay's refused
 * sends each add their own jitter to it.
 */
export function scheduledDelaySeconds(schedule: readonly number[], attempt: number, fallback: number): number {
  return schedule[Math.min(Math.max(attempt, 1), schedule.length) - 1] ?? fallback;
}
