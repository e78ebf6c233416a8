//! A real, throwaway PostgreSQL server for the tests of the PostgreSQL store.
//!
//! [`TestDatabase::new`] gives a fresh, empty database on a cluster shared by the tests of
//! one binary: the first to ask starts the cluster (initdb in a temp dir, listening on
//! 127.0.0.1 only at a free port, its unix socket in the temp dir, `fsync=on`,
//! `synchronous_commit=on`); it is stopped (`pg_ctl stop -m fast` on that data dir, i.e.
//! that postmaster's pid) and its dir removed when the test binary exits.
//! With `A2A_TEST_STORE=postgres` the plane's own suites run on it too, each store root on
//! a database of its own ([`database_of`], through `common::on_test_store`).
//! The server binaries come from `tools/ensure-postgres.sh` (which installs Debian's
//! `postgresql` package when it is missing and the tests run as root). PostgreSQL refuses
//! to run as root: then initdb and pg_ctl run as the `postgres` user, in a temp dir it owns.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The database superuser the clusters are made with (password auth over TCP).
pub const USER: &str = "a2a";

/// One running cluster; stopped and removed on drop.
pub struct TestPostgres {
    bin: PathBuf,
    dir: PathBuf,
    as_postgres: bool,
    port: u16,
    password: String,
    pid: u32,
    /// Serves TLS with the certificate and key in its dir (`server.crt`, `server.key`).
    tls: bool,
}

/// The cluster the tests of this binary share: started by the first that asks, kept
/// for the rest of the process (one initdb per test binary, not one per test that
/// happens to run alone) and stopped when the process exits ([`stop_shared`]).
static SHARED: Mutex<Option<Arc<TestPostgres>>> = Mutex::new(None);

/// Stops the shared cluster: run by the C library's `exit` once the tests are done (the
/// test harness returns from `main`), so no server outlives its test binary.
extern "C" fn stop_shared() {
    let cluster = SHARED.lock().unwrap_or_else(|p| p.into_inner()).take();
    drop(cluster);
}

impl TestPostgres {
    /// The shared cluster, started when no test has asked yet.
    pub fn shared() -> Arc<TestPostgres> {
        let mut shared = SHARED.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(running) = shared.as_ref() {
            return running.clone();
        }
        let started = Arc::new(TestPostgres::start());
        *shared = Some(started.clone());
        // SAFETY: registers a plain function with no arguments, as atexit requires.
        let registered = unsafe { libc::atexit(stop_shared) };
        assert_eq!(registered, 0, "atexit refused the shared cluster's stop");
        started
    }

    /// Starts a cluster of its own (for tests that stop or break it).
    pub fn start() -> TestPostgres {
        TestPostgres::start_with(None)
    }

    /// Starts a cluster of its own that serves TLS (`ssl = on`) with this certificate
    /// chain and private key (PEM), besides plain connections.
    pub fn start_with_tls(cert_pem: &str, key_pem: &str) -> TestPostgres {
        TestPostgres::start_with(Some((cert_pem, key_pem)))
    }

    fn start_with(tls: Option<(&str, &str)>) -> TestPostgres {
        let bin = server_bin_dir();
        let as_postgres = running_as_root();
        let dir = temp_dir();
        std::fs::create_dir_all(&dir).unwrap();
        if as_postgres {
            checked(
                Command::new("chown").arg("postgres:").arg(&dir),
                "chown the cluster dir to postgres",
            );
        }
        let password = random_hex(16);
        let pwfile = dir.join("pw");
        std::fs::write(&pwfile, format!("{password}\n")).unwrap();
        let mut cluster = TestPostgres {
            bin,
            dir,
            as_postgres,
            port: 0,
            password,
            pid: 0,
            tls: tls.is_some(),
        };
        if let Some((cert_pem, key_pem)) = tls {
            use std::os::unix::fs::PermissionsExt;
            let (cert, key) = (
                cluster.dir.join("server.crt"),
                cluster.dir.join("server.key"),
            );
            std::fs::write(&cert, cert_pem).unwrap();
            std::fs::write(&key, key_pem).unwrap();
            // The server refuses a key others may read.
            std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
            if as_postgres {
                checked(
                    Command::new("chown").arg("postgres:").arg(&cert).arg(&key),
                    "chown the TLS files to postgres",
                );
            }
        }
        // initdb's own fsyncs are skipped (a throwaway cluster); the server runs with
        // fsync and synchronous_commit on, as production does.
        let data = cluster.data_dir();
        let mut initdb = cluster.server_command("initdb");
        initdb
            .arg("-D")
            .arg(&data)
            .args(["-U", USER, "-E", "UTF8", "--locale=C", "--no-sync"])
            .args(["--auth-local=trust", "--auth-host=scram-sha-256"])
            .arg(format!("--pwfile={}", pwfile.display()));
        checked(&mut initdb, "initdb");
        std::fs::remove_file(&pwfile).unwrap();
        // A free port can be taken by another process between our probe and the server's
        // bind: try a few.
        let mut last_error = String::new();
        for _ in 0..5 {
            cluster.port = free_port();
            match cluster.pg_ctl_start() {
                Ok(pid) => {
                    cluster.pid = pid;
                    return cluster;
                }
                Err(error) => last_error = error,
            }
        }
        panic!("the test PostgreSQL did not start after 5 ports: {last_error}");
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn log_file(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    /// `program` from the server's bin dir, run as `postgres` when we are root.
    fn server_command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        if self.as_postgres {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(path);
            command
        } else {
            Command::new(path)
        }
    }

    fn pg_ctl_start(&self) -> Result<u32, String> {
        let mut options = format!(
            "-c listen_addresses=127.0.0.1 -p {} -c unix_socket_directories={} \
             -c fsync=on -c synchronous_commit=on -c max_connections=200",
            self.port,
            self.dir.display()
        );
        if self.tls {
            options.push_str(&format!(
                " -c ssl=on -c ssl_cert_file={} -c ssl_key_file={}",
                self.dir.join("server.crt").display(),
                self.dir.join("server.key").display()
            ));
        }
        let output = self
            .server_command("pg_ctl")
            .arg("start")
            .arg("-D")
            .arg(self.data_dir())
            .arg("-l")
            .arg(self.log_file())
            .args(["-w", "-t", "30", "-o", &options])
            .output()
            .map_err(|e| format!("pg_ctl could not run: {e}"))?;
        if !output.status.success() {
            let log = std::fs::read_to_string(self.log_file()).unwrap_or_default();
            return Err(format!("{}\nserver log:\n{log}", describe(&output)));
        }
        let pid_file = std::fs::read_to_string(self.data_dir().join("postmaster.pid"))
            .map_err(|e| format!("no postmaster.pid after pg_ctl start: {e}"))?;
        pid_file
            .lines()
            .next()
            .and_then(|line| line.trim().parse().ok())
            .ok_or_else(|| format!("postmaster.pid has no pid: {pid_file:?}"))
    }

    /// The server's TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The postmaster's pid.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The temp dir that holds the data dir, the log and the unix socket.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A `postgres://` URL for `database` over TCP, with the superuser's password.
    pub fn url(&self, database: &str) -> String {
        format!(
            "postgres://{USER}:{}@127.0.0.1:{}/{database}",
            self.password, self.port
        )
    }

    /// The superuser's password (for URLs of other forms than [`TestPostgres::url`]).
    pub fn password(&self) -> &str {
        &self.password
    }

    /// Runs `sql` with psql over the unix socket (as the superuser, trusted locally).
    pub fn psql(&self, database: &str, sql: &str) -> String {
        let mut command = self.server_command("psql");
        command
            .arg("-h")
            .arg(&self.dir)
            .args(["-p", &self.port.to_string(), "-U", USER, "-d", database])
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql]);
        String::from_utf8(checked(&mut command, "psql").stdout)
            .unwrap()
            .trim()
            .to_string()
    }
}

impl Drop for TestPostgres {
    fn drop(&mut self) {
        if self.pid != 0 {
            // Fast shutdown of this data dir's postmaster (pg_ctl signals the pid in its
            // postmaster.pid), waiting until it has exited.
            let _ = self
                .server_command("pg_ctl")
                .arg("stop")
                .arg("-D")
                .arg(self.data_dir())
                .args(["-m", "fast", "-w", "-t", "30"])
                .output();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A fresh database of its own on the shared cluster; dropped with it.
pub struct TestDatabase {
    pub cluster: Arc<TestPostgres>,
    pub name: String,
}

impl TestDatabase {
    pub fn new() -> TestDatabase {
        let cluster = TestPostgres::shared();
        let name = format!("t_{}", random_hex(8));
        cluster.psql("postgres", &format!("CREATE DATABASE {name}"));
        TestDatabase { cluster, name }
    }

    /// Its `postgres://` URL.
    pub fn url(&self) -> String {
        self.cluster.url(&self.name)
    }

    /// Runs `sql` in it with psql; the unaligned, tuples-only output.
    pub fn psql(&self, sql: &str) -> String {
        self.cluster.psql(&self.name, sql)
    }
}

impl Default for TestDatabase {
    fn default() -> Self {
        TestDatabase::new()
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        // Connections a test left open (a leaked pool) must not keep the database.
        let _ = self.cluster.psql(
            "postgres",
            &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
        );
    }
}

/// The server's bin dir, as `tools/ensure-postgres.sh` finds (or installs) it.
pub fn server_bin_dir() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/ensure-postgres.sh");
    let output = checked(
        Command::new("bash").arg(&script),
        "tools/ensure-postgres.sh",
    );
    PathBuf::from(String::from_utf8(output.stdout).unwrap().trim())
}

fn running_as_root() -> bool {
    let output = checked(Command::new("id").arg("-u"), "id -u");
    String::from_utf8_lossy(&output.stdout).trim() == "0"
}

/// A short path (the unix socket's path must fit in 107 bytes) that is ours alone.
fn temp_dir() -> PathBuf {
    std::env::temp_dir().join(format!("tp-pg-{}-{}", std::process::id(), random_hex(6)))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).unwrap();
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

fn describe(output: &Output) -> String {
    format!(
        "{}\nstdout: {}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Runs `command`, panicking with its output (what failed, and why) unless it succeeds.
fn checked(command: &mut Command, what: &str) -> Output {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{what} could not run: {e}"));
    assert!(
        output.status.success(),
        "{what} failed: {}",
        describe(&output)
    );
    output
}

/// Whether a process with `pid` exists (signal 0 via `kill -0`).
pub fn process_exists(pid: u32) -> bool {
    Command::new("kill")
        .args(["-0", &pid.to_string()])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Waits (bounded) until `pid` is gone.
pub fn wait_gone(pid: u32, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if !process_exists(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Whether this run puts the plane's suites on PostgreSQL (`A2A_TEST_STORE=postgres`,
/// set by `tools/test.sh` for its second pass) instead of SQLite.
pub fn suites_on_postgres() -> bool {
    match std::env::var("A2A_TEST_STORE").as_deref() {
        Ok("postgres") => true,
        Ok("" | "sqlite") | Err(_) => false,
        Ok(other) => panic!("A2A_TEST_STORE={other}: use `postgres` or `sqlite`"),
    }
}

/// The databases of the store roots opened on PostgreSQL, by root: a root opened again
/// (a restart) finds its database. Dropped with the test's [`super::TempRoot`].
static DATABASES: Mutex<Vec<(PathBuf, Arc<TestDatabase>)>> = Mutex::new(Vec::new());

/// The database of the store `root` (made on first use).
pub fn database_of(root: &Path) -> Arc<TestDatabase> {
    let mut databases = DATABASES.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, db)) = databases.iter().find(|(r, _)| r == root) {
        return db.clone();
    }
    let db = Arc::new(TestDatabase::new());
    databases.push((root.to_path_buf(), db.clone()));
    db
}

/// Forgets (and so drops) the databases of the roots under `dir`.
pub fn forget_databases_under(dir: &Path) {
    let gone: Vec<_> = {
        let mut databases = DATABASES.lock().unwrap_or_else(|p| p.into_inner());
        let (gone, kept) = std::mem::take(&mut *databases)
            .into_iter()
            .partition(|(root, _)| root.starts_with(dir));
        *databases = kept;
        gone
    };
    drop(gone);
}
