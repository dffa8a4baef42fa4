// The three roles of an explore master, one object each (role.ts says what the command asks of
// them), and which one the options make:
//
//   single       one master (no --masters, no --join): ends after the precise idle window; serves
//                remote workers with --port                                       (single.ts)
//   root         rank 0 of --masters N (needs --port): accepts the submasters on its port, waits
//                (bounded) until all joined, sends the roster, leads the two-phase quiescence (root.ts)
//   participant  a submaster (--join ROOT:PORT): joins the root's epoch, votes in the quiescence,
//                serves its own workers with --port                               (participant.ts)
//
// The network side (the worker server, the masters' channel, the statistics round) is loaded only
// by a master that serves workers or has peers: a lone master starts faster without it.
import { UsageError } from "../../errors.ts";
import type { ExploreOptions } from "./options.ts";
import { ParticipantMaster } from "./participant.ts";
import type { MasterRole } from "./role.ts";
import { RootMaster } from "./root.ts";
import { SingleMaster } from "./single.ts";

export function roleOf(o: ExploreOptions): MasterRole {
  if (o.join) return new ParticipantMaster(o, o.join);
  if ((o.masters ?? 1) <= 1) return new SingleMaster(o);
  if (o.port === null) throw new UsageError("--masters needs --port: the other masters join the root on that port");
  return new RootMaster(o, o.masters!);
}
