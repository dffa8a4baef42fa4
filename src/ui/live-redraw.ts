// The terminal redraw a live console draws with: log-update's function, loaded only when stdout
// is a terminal. Both campaign kinds' consoles take it, so its type lives below both.

/** log-update's redraw function (loaded only when there is a terminal to draw on). */
export interface LiveRedraw {
  (text: string): void;
  clear(): void;
}
