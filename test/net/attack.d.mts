// The types of attack.mjs, the hostile clients shared by the hostile suite and bench/hostile.mjs.

/** What the server did with one hostile connection. */
export interface Answer {
  /** The server's bytes, latin1. */
  reply: string;
  /** Whether the TCP connection was established at all (a listener's backlog can overflow). */
  connected: boolean;
  /** The socket error that ended it, if any (ECONNRESET after a refusal is normal). */
  error: string | null;
}

export type AnswerKind = "refused at accept" | "refused" | "never connected" | "no reply";

export function declareFrame(port: number, declared: number, timeoutMs?: number): Promise<Answer>;
export function sendOnce(port: number, bytes: Buffer | string, timeoutMs?: number): Promise<Answer>;
export function malformedFrames(token: string): Buffer[];
export function flood<T>(total: number, concurrency: number, one: (i: number) => Promise<T>): Promise<T[]>;
export function memoryOf(pid: number): { rssMB: number; peakMB: number };
export function answerKind(a: Answer): AnswerKind;
export function outcomeOf(a: Answer): AnswerKind | "reset";
export function unanswered(answers: Answer[]): Answer[];
export function besiege<T>(
  port: number,
  pid: number,
  o: { declarers: number; reconnectMs: number },
  during: () => Promise<T>,
): Promise<{ result: T; declared: Answer[]; rssMaxMB: number; seconds: number }>;
