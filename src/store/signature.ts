// A find's signature: the first level of identity. Finds with one signature are one symptom
// (the same bucket and, with numbers, addresses and quoted values set aside, the same message),
// grouped at once, before anything is minimized. The minimized-input key then splits a signature
// into distinct failures. A generator that knows better writes `signature` into meta.json.

/** The longest signature kept; a longer message is cut (it still groups by its start). */
export const SIGNATURE_MAX_CHARS = 200;

/**
 * `bucket: <normalised message>`, or `bucket: <given>` when the generator gave one. Normalising
 * replaces hexadecimal and decimal numbers with N and collapses white space, so "at line 16" and
 * "at line 3" are one signature.
 */
export function findSignature(bucket: string, message: string | null, given: string | null): string {
  const text = given !== null ? collapse(given) : normaliseMessage(message ?? "");
  return `${bucket}: ${text}`.slice(0, SIGNATURE_MAX_CHARS);
}

export function normaliseMessage(message: string): string {
  return collapse(
    message
      .replace(/0x[0-9a-fA-F]+/g, "N")
      .replace(/\b[0-9a-fA-F]{8,}\b/g, "N")
      .replace(/-?\d+(\.\d+)?/g, "N"),
  );
}

function collapse(s: string): string {
  // Control characters never reach a report or a group key.
  return s.replace(/[\0-\x1f\x7f]+/g, " ").replace(/\s+/g, " ").trim();
}
