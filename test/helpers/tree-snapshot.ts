// A directory tree as plain data, to assert that something was left exactly as it was (or that
// two trees built alike ended alike).
import { lstatSync, readdirSync, readFileSync, readlinkSync } from "node:fs";
import { join } from "node:path";

/**
 * Every entry below `dir` by relative path: a file's mode and content, "dir", "-> target" for a
 * symlink, "special" for anything else; with `inodes`, files and directories also carry their
 * inode and mtime (what "untouched" means for a directory nobody may change). A missing `dir`
 * is an empty tree.
 */
export function snapshot(dir: string, inodes = false): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (at: string, rel: string) => {
    let names: string[];
    try {
      names = readdirSync(at).sort();
    } catch {
      return;
    }
    for (const name of names) {
      const path = join(at, name);
      const key = rel ? `${rel}/${name}` : name;
      const st = lstatSync(path);
      if (st.isSymbolicLink()) out[key] = `-> ${readlinkSync(path)}`;
      else if (st.isDirectory()) {
        out[key] = inodes ? `dir ${st.ino} ${st.mtimeMs}` : "dir";
        walk(path, key);
      } else if (st.isFile()) out[key] = `${(st.mode & 0o777).toString(8)} ${readFileSync(path, "utf8")}${inodes ? ` ${st.ino} ${st.mtimeMs}` : ""}`;
      else out[key] = "special";
    }
  };
  walk(dir, "");
  return out;
}
