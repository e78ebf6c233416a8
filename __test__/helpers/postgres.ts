// A throwaway PostgreSQL cluster for Node tests, started the way the Rust tests' helper
// (tests/common/postgres.rs) starts one: the server binaries tools/ensure-postgres.sh finds
// (or installs as root), initdb into a temp dir (as the `postgres` user when we are root,
// the server refusing to run as root), a random superuser password, listening on 127.0.0.1
// only, fsync and synchronous_commit on. stop() stops this data dir's server (pg_ctl stop,
// then its postmaster's pid if that failed) and removes the dir: never any other server.
import { execFileSync, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { repoRoot } from "./pi.ts";

const USER = "a2a";

export interface TestPostgres {
  /** The `postgres://` URL of `database` over TCP (with the password). */
  url(database: string): string;
  /** A fresh database of its own; resolves to its URL. */
  createDatabase(): string;
  /** Runs `sql` in `database` with psql; the unaligned, tuples-only output. */
  psql(database: string, sql: string): string;
  /** The postmaster's pid. */
  pid: number;
  stop(): void;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as { port: number }).port;
      server.close(() => resolve(port));
    });
  });
}

export async function startPostgres(): Promise<TestPostgres> {
  const bin = execFileSync("bash", [join(repoRoot, "tools/ensure-postgres.sh")], { encoding: "utf8" }).trim();
  const asPostgres = process.getuid?.() === 0;
  const dir = mkdtempSync(join(tmpdir(), "tp-node-pg-"));
  if (asPostgres) execFileSync("chown", ["postgres:", dir]);
  chmodSync(dir, 0o700);
  const run = (program: string, args: string[]) => {
    const [cmd, argv] = asPostgres ? ["runuser", ["-u", "postgres", "--", join(bin, program), ...args]] : [join(bin, program), args];
    const r = spawnSync(cmd, argv as string[], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
    if (r.status !== 0) throw new Error(`${program} ${args.join(" ")} failed (${r.status}): ${r.stderr}${r.stdout}`);
    return r.stdout;
  };
  const password = randomBytes(16).toString("hex");
  const pwfile = join(dir, "pw");
  writeFileSync(pwfile, `${password}\n`);
  if (asPostgres) execFileSync("chown", ["postgres:", pwfile]);
  const data = join(dir, "data");
  run("initdb", ["-D", data, "-U", USER, "-E", "UTF8", "--locale=C", "--no-sync", "--auth-local=trust", "--auth-host=scram-sha-256", `--pwfile=${pwfile}`]);
  rmSync(pwfile);
  let port = 0;
  let lastError = "";
  for (let attempt = 0; attempt < 5 && port === 0; attempt++) {
    const candidate = await freePort();
    const options = `-c listen_addresses=127.0.0.1 -p ${candidate} -c unix_socket_directories=${dir} -c fsync=on -c synchronous_commit=on -c max_connections=200`;
    try {
      run("pg_ctl", ["start", "-D", data, "-l", join(dir, "server.log"), "-w", "-t", "30", "-o", options]);
      port = candidate;
    } catch (err) {
      lastError = `${(err as Error).message}\n${readFileSync(join(dir, "server.log"), "utf8")}`;
    }
  }
  if (port === 0) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`the test PostgreSQL did not start after 5 ports: ${lastError}`);
  }
  const pid = Number(readFileSync(join(data, "postmaster.pid"), "utf8").split("\n")[0]);
  const psql = (database: string, sql: string) =>
    run("psql", ["-h", dir, "-p", String(port), "-U", USER, "-d", database, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql]).trim();
  let stopped = false;
  return {
    pid,
    url: (database) => `postgres://${USER}:${password}@127.0.0.1:${port}/${database}`,
    createDatabase() {
      const name = `t_${randomBytes(4).toString("hex")}`;
      psql("postgres", `CREATE DATABASE ${name}`);
      return `postgres://${USER}:${password}@127.0.0.1:${port}/${name}`;
    },
    psql,
    stop() {
      if (stopped) return;
      stopped = true;
      try {
        run("pg_ctl", ["stop", "-D", data, "-m", "fast", "-w", "-t", "30"]);
      } catch {
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          // already gone
        }
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
