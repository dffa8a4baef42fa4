// The installed package's own files (the bundled examples). Both src/cli/*.ts and the compiled
// dist/cli/*.js sit two levels below the package root.
import { fileURLToPath } from "node:url";
import { join } from "node:path";

export const PACKAGE_ROOT = fileURLToPath(new URL("../../", import.meta.url));

export function bundledExample(relativePath: string): string {
  return join(PACKAGE_ROOT, "examples", relativePath);
}
