// Where a command finds its config, store and output directory. The store and the output
// directory default to places beside the config file, so every host that mounts the campaign
// directory at the same path agrees on them without options.
import { dirname, resolve } from "node:path";
export const DEFAULT_CONFIG_NAME = "fuzzfleet.toml";

export interface GlobalOptions {
  config?: string;
  db?: string;
  out?: string;
}

export interface CampaignPaths {
  configPath: string;
  dbPath: string;
  outDir: string;
}

export function campaignPaths(g: GlobalOptions, cwd: string = process.cwd()): CampaignPaths {
  const configPath = resolve(cwd, g.config ?? DEFAULT_CONFIG_NAME);
  const dir = dirname(configPath);
  return {
    configPath,
    dbPath: g.db ? resolve(cwd, g.db) : resolve(dir, "fuzzfleet.db"),
    outDir: g.out ? resolve(cwd, g.out) : resolve(dir, "fuzzfleet-out"),
  };
}
