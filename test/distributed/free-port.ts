// A port on 127.0.0.1 that was free a moment ago: for a master whose address its workers must be
// given before it starts, and for a dial that must find nobody listening. (Belongs with the other
// shared scaffolding in test/helpers/ once that folder can take it.)
import { createServer, type AddressInfo } from "node:net";

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
