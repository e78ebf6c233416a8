//! Configuration from the environment, with errors that name the variable. A variable that
//! is set but unusable is an error, never a silent fallback.

use std::path::{Path, PathBuf};

/// A configuration error: which variable, what is wrong, what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub variable: String,
    pub message: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.variable, self.message)
    }
}

impl std::error::Error for ConfigError {}

/// Reads a variable; an empty value counts as unset.
pub fn var(env: &dyn Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    env(name).filter(|v| !v.is_empty())
}

fn absolute(name: &str, value: String) -> Result<PathBuf, ConfigError> {
    let path = PathBuf::from(&value);
    if path.is_absolute() {
        Ok(path)
    } else {
        Err(ConfigError {
            variable: name.to_string(),
            message: format!(
                "`{value}` is not an absolute path; set it to one (or unset it to use the default)"
            ),
        })
    }
}

/// The task-plane store root: `CHANNELS_TASK_STORE_PATH`, else
/// `${XDG_DATA_HOME:-$HOME/.local/share}/outfitter/channels/task-plane`.
pub fn store_root(env: &dyn Fn(&str) -> Option<String>) -> Result<PathBuf, ConfigError> {
    if let Some(path) = var(env, "CHANNELS_TASK_STORE_PATH") {
        return absolute("CHANNELS_TASK_STORE_PATH", path);
    }
    let data_home = match var(env, "XDG_DATA_HOME") {
        Some(dir) => absolute("XDG_DATA_HOME", dir)?,
        None => {
            let home = var(env, "HOME").ok_or_else(|| ConfigError {
                variable: "HOME".into(),
                message: "is not set, so the default store root cannot be found; set CHANNELS_TASK_STORE_PATH".into(),
            })?;
            absolute("HOME", home)?.join(".local/share")
        }
    };
    Ok(data_home.join("outfitter/channels/task-plane"))
}

/// The log directory: `A2A_LOG_DIR` (absolute), else `<store root>/logs` (the store root
/// being `root` when the caller opened one, else the configured one).
pub fn log_dir(
    env: &dyn Fn(&str) -> Option<String>,
    root: Option<&std::path::Path>,
) -> Result<PathBuf, ConfigError> {
    if let Some(dir) = var(env, crate::log::LOG_DIR_VAR) {
        return absolute(crate::log::LOG_DIR_VAR, dir);
    }
    Ok(match root {
        Some(root) => root.join("logs"),
        None => store_root(env)?.join("logs"),
    })
}

/// The variable that puts the store on PostgreSQL instead of the embedded SQLite.
pub const STORE_URL_VAR: &str = "A2A_STORE_URL";

/// Where the durable store lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreBackend {
    /// The embedded SQLite store under the store root (`A2A_STORE_URL` unset).
    Sqlite,
    /// A PostgreSQL database (`A2A_STORE_URL=postgres://…`).
    Postgres(PostgresUrl),
}

/// A `postgres://` or `postgresql://` URL that parses as a connection string and names a
/// host, with its TLS settings (`sslmode`, `sslrootcert`) taken out. It may hold a
/// password: `Debug` and [`PostgresUrl::redacted`] never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct PostgresUrl {
    /// As given.
    text: String,
    /// Without `sslmode` and `sslrootcert` (the client's parser knows neither
    /// `verify-ca` / `verify-full` nor `sslrootcert`).
    client: String,
    ssl_mode: SslMode,
    ssl_root_cert: Option<PathBuf>,
}

/// The URL's `sslmode`, as libpq reads it: whether the database connection uses TLS and
/// what of the server's certificate is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// No TLS.
    Disable,
    /// TLS when the server offers it, else plain; the certificate checked only against
    /// a given `sslrootcert`. The default when the URL has no `sslmode` (libpq's).
    Prefer,
    /// TLS or no connection; the certificate checked only against a given `sslrootcert`.
    Require,
    /// TLS, the certificate signed by the CA (`sslrootcert`), any name.
    VerifyCa,
    /// TLS, the certificate signed by the CA and issued for the host connected to.
    VerifyFull,
}

impl SslMode {
    /// The value as written in a URL.
    pub fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

impl PostgresUrl {
    /// The URL as given (with its password): never for messages.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The URL for the client's own parser: as given, less `sslmode` and `sslrootcert`
    /// (see [`PostgresUrl::ssl_mode`]).
    pub fn client_str(&self) -> &str {
        &self.client
    }

    /// `sslmode` ([`SslMode::Prefer`] when absent, as libpq).
    pub fn ssl_mode(&self) -> SslMode {
        self.ssl_mode
    }

    /// `sslrootcert`: the PEM file of the CA certificates the server's must chain to.
    pub fn ssl_root_cert(&self) -> Option<&Path> {
        self.ssl_root_cert.as_deref()
    }

    /// The URL with its password (in the user info or a `password=` parameter) as `***`.
    pub fn redacted(&self) -> String {
        redact_password(&self.text)
    }
}

/// Splits the TLS parameters (`sslmode`, `sslrootcert`) off the query string of `url`.
fn split_tls_parameters(url: &str) -> Result<(String, SslMode, Option<PathBuf>), String> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_string(), SslMode::Prefer, None));
    };
    let (mut mode, mut root_cert, mut kept) = (SslMode::Prefer, None, Vec::new());
    for pair in query.split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = percent_encoding::percent_decode_str(value)
            .decode_utf8_lossy()
            .into_owned();
        match key {
            "sslmode" => {
                mode = match value.as_str() {
                    "disable" => SslMode::Disable,
                    "prefer" => SslMode::Prefer,
                    "require" => SslMode::Require,
                    "verify-ca" => SslMode::VerifyCa,
                    "verify-full" => SslMode::VerifyFull,
                    other => {
                        return Err(format!(
                            "sslmode={other} is not one this client supports: use disable, \
                             prefer (the default), require, verify-ca or verify-full"
                        ))
                    }
                }
            }
            "sslrootcert" if value.is_empty() || value == "system" => {
                return Err(format!(
                    "sslrootcert={value} names no file: give the path of the PEM file that \
                     holds the CA certificate the server's certificate is signed by"
                ))
            }
            "sslrootcert" => root_cert = Some(PathBuf::from(value)),
            _ => kept.push(pair),
        }
    }
    let client = match kept.is_empty() {
        true => base.to_string(),
        false => format!("{base}?{}", kept.join("&")),
    };
    Ok((client, mode, root_cert))
}

impl std::fmt::Debug for PostgresUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PostgresUrl({})", self.redacted())
    }
}

/// `A2A_STORE_URL`: unset (or empty) → SQLite; a `postgres://` or `postgresql://` URL →
/// PostgreSQL; anything else is an error naming the variable, never a silent fallback.
pub fn store_backend(env: &dyn Fn(&str) -> Option<String>) -> Result<StoreBackend, ConfigError> {
    let Some(url) = var(env, STORE_URL_VAR) else {
        return Ok(StoreBackend::Sqlite);
    };
    let error = |message: String| ConfigError {
        variable: STORE_URL_VAR.into(),
        message,
    };
    let shown = redact_password(&url);
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return Err(error(format!(
            "`{shown}` is not a PostgreSQL URL: set it to postgres://user:password@host:5432/database \
             for a fleet on PostgreSQL, or unset it to use the embedded SQLite store"
        )));
    }
    let (client, ssl_mode, ssl_root_cert) =
        split_tls_parameters(&url).map_err(|e| error(format!("`{shown}`: {e}")))?;
    let config: postgres::Config = client.parse().map_err(|e| {
        error(format!(
            "`{shown}` is not a usable PostgreSQL URL ({e}); write it as postgres://user:password@host:5432/database \
             (percent-encode special characters in the user and password)"
        ))
    })?;
    if config.get_hosts().is_empty() {
        return Err(error(format!(
            "`{shown}` names no host: write it as postgres://user:password@host:5432/database"
        )));
    }
    Ok(StoreBackend::Postgres(PostgresUrl {
        text: url,
        client,
        ssl_mode,
        ssl_root_cert,
    }))
}

/// A command that reads the embedded SQLite store's file directly (the offline store
/// inspector) cannot serve a plane on PostgreSQL: with `A2A_STORE_URL` set it is refused,
/// naming the variable and what to use instead, rather than reading a node's root (which
/// holds no Tasks on a fleet) and answering "no such Task". `command` names the command.
pub fn sqlite_only(command: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
    match store_backend(env)? {
        StoreBackend::Sqlite => Ok(()),
        StoreBackend::Postgres(url) => Err(ConfigError {
            variable: STORE_URL_VAR.into(),
            message: format!(
                "{command} reads only the embedded SQLite store under a store root, but A2A_STORE_URL \
                 puts the Tasks on PostgreSQL (`{}`): ask the running resident instead \
                 (`a2a-task-plane status`, `/a2a tasks`, `/a2a show <taskId>` in Pi), or unset \
                 A2A_STORE_URL to inspect a SQLite store root",
                url.redacted()
            ),
        }),
    }
}

/// The variable that sets how long a node's lease on a wake lasts unless renewed.
pub const WAKE_LEASE_VAR: &str = "A2A_WAKE_LEASE_MS";
/// The default wake lease: a node that dies mid-turn leaves its Task for this long.
pub const DEFAULT_WAKE_LEASE_MS: i64 = 30_000;
/// The bounds of `A2A_WAKE_LEASE_MS`: long enough for renewals every lease/3 to land
/// across a slow network, short enough that a dead node's Task is taken within minutes.
pub const WAKE_LEASE_RANGE_MS: std::ops::RangeInclusive<i64> = 3_000..=600_000;

/// `A2A_WAKE_LEASE_MS`: how long a node's lease on a wake lasts unless renewed (renewed
/// every third of it while the turn runs). Unset → [`DEFAULT_WAKE_LEASE_MS`]; a value that
/// is not a whole number of ms in [`WAKE_LEASE_RANGE_MS`] is an error naming the variable.
pub fn wake_lease_ms(env: &dyn Fn(&str) -> Option<String>) -> Result<i64, ConfigError> {
    let Some(value) = var(env, WAKE_LEASE_VAR) else {
        return Ok(DEFAULT_WAKE_LEASE_MS);
    };
    match value.trim().parse::<i64>() {
        Ok(ms) if WAKE_LEASE_RANGE_MS.contains(&ms) => Ok(ms),
        _ => Err(ConfigError {
            variable: WAKE_LEASE_VAR.into(),
            message: format!(
                "`{value}` is not a wake lease length in ms within {}..={}; set a whole number \
                 in that range (or unset it for the default {DEFAULT_WAKE_LEASE_MS})",
                WAKE_LEASE_RANGE_MS.start(),
                WAKE_LEASE_RANGE_MS.end()
            ),
        }),
    }
}

/// `url` with the password of its user info and of a `password=` parameter as `***`.
pub fn redact_password(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(at) => url.split_at(at + 3),
        None => ("", url),
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rfind('@') {
        Some(at) => {
            let (userinfo, host) = authority.split_at(at);
            match userinfo.find(':') {
                Some(colon) => format!("{}:***{host}", &userinfo[..colon]),
                None => authority.to_string(),
            }
        }
        None => authority.to_string(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let params: Vec<String> = query
                .split('&')
                .map(|param| match param.split_once('=') {
                    Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}=***"),
                    _ => param.to_string(),
                })
                .collect();
            format!("{path}?{}", params.join("&"))
        }
        None => tail.to_string(),
    };
    format!("{scheme}{authority}{tail}")
}

/// The process environment, for the functions above.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn store_root_prefers_the_explicit_variable_then_xdg_then_home() {
        let e = env(&[
            ("CHANNELS_TASK_STORE_PATH", "/srv/tp"),
            ("XDG_DATA_HOME", "/x"),
            ("HOME", "/h"),
        ]);
        assert_eq!(store_root(&e).unwrap(), PathBuf::from("/srv/tp"));
        let e = env(&[("XDG_DATA_HOME", "/x"), ("HOME", "/h")]);
        assert_eq!(
            store_root(&e).unwrap(),
            PathBuf::from("/x/outfitter/channels/task-plane")
        );
        let e = env(&[("HOME", "/h"), ("XDG_DATA_HOME", "")]);
        assert_eq!(
            store_root(&e).unwrap(),
            PathBuf::from("/h/.local/share/outfitter/channels/task-plane")
        );
    }

    #[test]
    fn the_wake_lease_defaults_to_30_s_and_takes_3_s_to_10_min() {
        let with = |value: &str| wake_lease_ms(&env(&[(WAKE_LEASE_VAR, value)]));
        assert_eq!(wake_lease_ms(&env(&[])).unwrap(), 30_000);
        assert_eq!(with("").unwrap(), 30_000);
        assert_eq!(with("3000").unwrap(), 3_000);
        assert_eq!(with("600000").unwrap(), 600_000);
        for bad in ["2999", "600001", "-5", "30s"] {
            let err = with(bad).unwrap_err();
            assert_eq!(err.variable, "A2A_WAKE_LEASE_MS");
            assert!(err.message.contains("3000..=600000"), "{}", err.message);
            assert!(err.message.contains(&format!("`{bad}`")), "{}", err.message);
        }
    }

    #[test]
    fn the_stream_coalescing_window_defaults_to_2_ms_and_takes_0_to_1000() {
        let with = |value: Option<&str>| {
            let mut pairs = vec![("A2A_CREDENTIALS_PATH", "/etc/a2a/credentials.json")];
            pairs.extend(value.map(|v| ("A2A_STREAM_COALESCE_MS", v)));
            ListenerConfig::from_env(&env(&pairs))
        };
        assert_eq!(with(None).unwrap().stream_coalesce_ms, 2);
        assert_eq!(with(Some("0")).unwrap().stream_coalesce_ms, 0);
        assert_eq!(with(Some("1000")).unwrap().stream_coalesce_ms, 1000);
        for bad in ["1001", "-1", "soon"] {
            let err = with(Some(bad)).unwrap_err();
            assert_eq!(err.variable, "A2A_STREAM_COALESCE_MS");
            assert!(err.message.contains("0..=1000"), "{}", err.message);
        }
    }

    #[test]
    fn a_binding_is_turned_off_by_its_variable_and_a_bad_value_names_it() {
        let with = |value: Option<&str>| {
            let mut pairs = vec![("A2A_CREDENTIALS_PATH", "/etc/a2a/credentials.json")];
            pairs.extend(value.map(|v| ("A2A_JSONRPC", v)));
            ListenerConfig::from_env(&env(&pairs))
        };
        assert!(with(None).unwrap().jsonrpc, "served by default");
        assert!(!with(Some("0")).unwrap().jsonrpc);
        assert!(with(Some("1")).unwrap().jsonrpc);
        let err = with(Some("maybe")).unwrap_err();
        assert_eq!(err.variable, "A2A_JSONRPC");
        assert!(err.message.contains("`maybe`"), "{}", err.message);
        let grpc = |pairs: &[(&str, &str)]| {
            let mut all = vec![("A2A_CREDENTIALS_PATH", "/etc/a2a/credentials.json")];
            all.extend_from_slice(pairs);
            ListenerConfig::from_env(&env(&all))
        };
        assert!(!grpc(&[("A2A_GRPC", "0")]).unwrap().grpc);
        assert_eq!(
            grpc(&[("A2A_GRPC", "off")]).unwrap().grpc_bind_port(),
            Ok(None)
        );
        assert_eq!(grpc(&[("A2A_GRPC", "x")]).unwrap_err().variable, "A2A_GRPC");
        assert_eq!(
            grpc(&[("A2A_GRPC_PORT", "x")]).unwrap_err().variable,
            "A2A_GRPC_PORT"
        );
    }

    #[test]
    fn tls_needs_both_the_certificate_and_the_key_and_an_error_names_the_missing_one() {
        let tls = |pairs: &[(&str, &str)]| {
            let mut all = vec![("A2A_CREDENTIALS_PATH", "/etc/a2a/credentials.json")];
            all.extend_from_slice(pairs);
            ListenerConfig::from_env(&env(&all)).map(|c| c.tls)
        };
        assert_eq!(tls(&[]), Ok(None));
        assert_eq!(
            tls(&[("A2A_TLS_CERT", "/c.pem"), ("A2A_TLS_KEY", "/k.pem")]),
            Ok(Some(TlsFiles {
                cert: "/c.pem".into(),
                key: "/k.pem".into()
            }))
        );
        let err = tls(&[("A2A_TLS_CERT", "/c.pem")]).unwrap_err();
        assert_eq!(err.variable, "A2A_TLS_KEY");
        assert!(err.message.contains("A2A_TLS_CERT"), "{}", err.message);
        let err = tls(&[("A2A_TLS_KEY", "/k.pem")]).unwrap_err();
        assert_eq!(err.variable, "A2A_TLS_CERT");
        let err = tls(&[("A2A_TLS_CERT", "c.pem"), ("A2A_TLS_KEY", "/k.pem")]).unwrap_err();
        assert_eq!(err.variable, "A2A_TLS_CERT");
    }

    #[test]
    fn the_grpc_port_is_its_own_variable_else_the_next_port_else_an_ephemeral_one() {
        let port = |pairs: &[(&str, &str)]| {
            let mut all = vec![("A2A_CREDENTIALS_PATH", "/etc/a2a/credentials.json")];
            all.extend_from_slice(pairs);
            ListenerConfig::from_env(&env(&all)).and_then(|c| c.grpc_bind_port())
        };
        assert_eq!(port(&[]), Ok(Some(8789)));
        assert_eq!(port(&[("A2A_PORT", "9000")]), Ok(Some(9001)));
        assert_eq!(port(&[("A2A_PORT", "0")]), Ok(Some(0)));
        assert_eq!(
            port(&[("A2A_PORT", "9000"), ("A2A_GRPC_PORT", "7000")]),
            Ok(Some(7000))
        );
        let err = port(&[("A2A_PORT", "65535")]).unwrap_err();
        assert_eq!(err.variable, "A2A_GRPC_PORT");
    }

    #[test]
    fn an_option_overrides_its_variable_under_the_same_rule_and_an_error_names_it() {
        let option = |name, variable, value: Option<&str>| ListenerOption {
            name,
            variable,
            value: value.map(str::to_string),
        };
        let e = env(&[
            ("A2A_CREDENTIALS_PATH", "/etc/a2a/credentials.json"),
            ("A2A_PORT", "9000"),
            ("A2A_MAX_STREAMS", "7"),
        ]);
        let config = ListenerConfig::with_options(
            &[
                option("port", "A2A_PORT", Some("0")),
                option("maxStreams", "A2A_MAX_STREAMS", None),
            ],
            &e,
        )
        .unwrap();
        assert_eq!(config.port, 0, "the option overrides the variable");
        assert_eq!(
            config.max_streams, 7,
            "an option left out keeps the variable"
        );

        let err = ListenerConfig::with_options(
            &[option(
                "streamCoalesceMs",
                "A2A_STREAM_COALESCE_MS",
                Some("1001"),
            )],
            &e,
        )
        .unwrap_err();
        assert_eq!(err.option, Some("streamCoalesceMs"));
        assert!(
            err.to_string().starts_with(
                "invalid option `streamCoalesceMs` (the same rule as A2A_STREAM_COALESCE_MS): "
            ),
            "{err}"
        );
        assert!(err.to_string().contains("0..=1000"), "{err}");

        let bad_env = env(&[
            ("A2A_CREDENTIALS_PATH", "/etc/a2a/credentials.json"),
            ("A2A_PORT", "http"),
        ]);
        let err =
            ListenerConfig::with_options(&[option("host", "A2A_HOST", Some("::1"))], &bad_env)
                .unwrap_err();
        assert_eq!(err.option, None, "the variable, not an option, was wrong");
        assert!(err.to_string().starts_with("A2A_PORT: "), "{err}");
    }

    #[test]
    fn the_store_url_selects_sqlite_when_unset_and_postgres_for_a_postgres_url() {
        assert_eq!(store_backend(&env(&[])), Ok(StoreBackend::Sqlite));
        assert_eq!(
            store_backend(&env(&[("A2A_STORE_URL", "")])),
            Ok(StoreBackend::Sqlite)
        );
        for url in [
            "postgres://a2a:s3cret@db.example:5432/fleet",
            "postgresql://a2a@10.0.0.5/fleet?sslmode=disable",
        ] {
            match store_backend(&env(&[("A2A_STORE_URL", url)])) {
                Ok(StoreBackend::Postgres(parsed)) => assert_eq!(parsed.as_str(), url),
                other => panic!("{url}: {other:?}"),
            }
        }
    }

    #[test]
    fn an_unusable_store_url_is_an_error_naming_the_variable_without_the_password() {
        for (url, says) in [
            ("mysql://a2a:s3cret@db/fleet", "is not a PostgreSQL URL"),
            ("/var/lib/a2a.sqlite3", "is not a PostgreSQL URL"),
            (
                "postgres://a2a:s3cret@db:notaport/fleet",
                "is not a usable PostgreSQL URL",
            ),
            ("postgres://a2a:s3cret@/fleet", "names no host"),
        ] {
            let err = store_backend(&env(&[("A2A_STORE_URL", url)])).unwrap_err();
            assert_eq!(err.variable, "A2A_STORE_URL", "{url}");
            assert!(err.message.contains(says), "{url}: {}", err.message);
            assert!(!err.to_string().contains("s3cret"), "{url}: {err}");
        }
    }

    #[test]
    fn a_store_url_is_shown_with_its_password_redacted() {
        assert_eq!(
            redact_password("postgres://a2a:s3cret@db:5432/fleet"),
            "postgres://a2a:***@db:5432/fleet"
        );
        assert_eq!(
            redact_password("postgres://a2a@db/fleet?password=s3cret&sslmode=require"),
            "postgres://a2a@db/fleet?password=***&sslmode=require"
        );
        assert_eq!(
            redact_password("postgres://db/fleet"),
            "postgres://db/fleet"
        );
        let url = match store_backend(&env(&[("A2A_STORE_URL", "postgres://u:pw@h/d")])) {
            Ok(StoreBackend::Postgres(url)) => url,
            other => panic!("{other:?}"),
        };
        assert_eq!(format!("{url:?}"), "PostgresUrl(postgres://u:***@h/d)");
    }

    #[test]
    fn the_urls_sslmode_and_sslrootcert_are_read_as_libpq_reads_them_and_prefer_is_the_default() {
        let parse = |url: &str| match store_backend(&env(&[("A2A_STORE_URL", url)])) {
            Ok(StoreBackend::Postgres(url)) => Ok(url),
            Ok(other) => panic!("{other:?}"),
            Err(e) => Err(e),
        };
        let url = parse("postgres://u:pw@h/d").unwrap();
        assert_eq!(url.ssl_mode(), SslMode::Prefer);
        assert_eq!(url.ssl_root_cert(), None);
        let url = parse(
            "postgres://u:pw@h/d?application_name=x&sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem",
        )
        .unwrap();
        assert_eq!(url.ssl_mode(), SslMode::VerifyFull);
        assert_eq!(url.ssl_root_cert(), Some(Path::new("/etc/ca.pem")));
        assert_eq!(url.client_str(), "postgres://u:pw@h/d?application_name=x");
        assert_eq!(
            format!("{url:?}"),
            "PostgresUrl(postgres://u:***@h/d?application_name=x&sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem)"
        );
        for (mode, expected) in [
            ("disable", SslMode::Disable),
            ("require", SslMode::Require),
            ("verify-ca", SslMode::VerifyCa),
        ] {
            let url = parse(&format!("postgres://u:pw@h/d?sslmode={mode}")).unwrap();
            assert_eq!(
                (url.ssl_mode(), url.client_str()),
                (expected, "postgres://u:pw@h/d")
            );
        }
        let err = parse("postgres://u:pw@h/d?sslmode=allow").unwrap_err();
        assert_eq!(err.variable, "A2A_STORE_URL");
        assert!(
            err.message.contains("sslmode=allow") && err.message.contains("verify-full"),
            "{err}"
        );
        assert!(!err.message.contains("pw@"), "{err}");
        let err = parse("postgres://u:pw@h/d?sslrootcert=system").unwrap_err();
        assert!(err.message.contains("CA certificate"), "{err}");
    }

    #[test]
    fn sqlite_only_commands_are_refused_on_postgres_naming_the_variable() {
        assert!(sqlite_only("the inspector", &env(&[])).is_ok());
        let err = sqlite_only(
            "the inspector",
            &env(&[("A2A_STORE_URL", "postgres://u:pw@h/d")]),
        )
        .unwrap_err();
        assert_eq!(err.variable, "A2A_STORE_URL");
        assert!(err.message.starts_with("the inspector reads only"), "{err}");
        assert!(err.message.contains("postgres://u:***@h/d"), "{err}");
        assert!(!err.message.contains("pw"), "{err}");
        // An unusable value is the variable's own error.
        let err =
            sqlite_only("the inspector", &env(&[("A2A_STORE_URL", "mysql://x")])).unwrap_err();
        assert!(err.message.contains("not a PostgreSQL URL"), "{err}");
    }

    #[test]
    fn an_unusable_store_root_names_the_variable() {
        let err = store_root(&env(&[("CHANNELS_TASK_STORE_PATH", "relative/dir")])).unwrap_err();
        assert_eq!(err.variable, "CHANNELS_TASK_STORE_PATH");
        let err = store_root(&env(&[("XDG_DATA_HOME", "rel"), ("HOME", "/h")])).unwrap_err();
        assert_eq!(err.variable, "XDG_DATA_HOME");
        let err = store_root(&env(&[])).unwrap_err();
        assert!(
            err.to_string().contains("CHANNELS_TASK_STORE_PATH"),
            "{err}"
        );
    }
}

/// The listener's configuration (the A2A HTTP+JSON binding).
#[derive(Debug, Clone, PartialEq)]
pub struct ListenerConfig {
    /// Where to bind (`A2A_HOST`:`A2A_PORT`, default `127.0.0.1:8788`; port 0 picks one).
    pub host: String,
    pub port: u16,
    /// The interface URL in the Agent Card (`A2A_PUBLIC_URL`, default `http://host:port`).
    pub public_url: Option<String>,
    pub agent_name: String,
    pub agent_description: String,
    pub agent_version: String,
    /// `A2A_CREDENTIALS_PATH`: `{"credentials": [{"token", "principal"}]}`.
    pub credentials_path: PathBuf,
    /// How long a blocking `message:send` waits for the Task to settle.
    pub blocking_timeout_ms: u64,
    /// How long the executor may take to answer a new message directly before the message
    /// becomes a Task (`A2A_EXECUTOR_TIMEOUT_MS`).
    pub executor_timeout_ms: u64,
    /// Largest request body accepted (413 beyond).
    pub max_body_bytes: usize,
    /// Most connections served at once; further ones wait in the accept queue.
    pub max_connections: usize,
    /// A client that sends no complete request head within this time is dropped; an idle
    /// keep-alive connection is closed after it.
    pub idle_timeout_ms: u64,
    /// A client that reads nothing of a response (or stream) for this long is dropped.
    pub write_timeout_ms: u64,
    /// Most SSE streams open at once, overall and per principal (429 beyond); streams do
    /// not count against `max_connections`.
    pub max_streams: usize,
    pub max_streams_per_principal: usize,
    /// How long at most `message:stream` holds a new Task's first frame (its snapshot) for
    /// the Task's first update, so an agent that answers at once costs the stream one write
    /// instead of two (`A2A_STREAM_COALESCE_MS`; 0 sends the snapshot at once). Without an
    /// update a hold ends after between half and all of it (holds share timers).
    pub stream_coalesce_ms: u64,
    /// Whether the JSON-RPC binding is served (and listed in the card) beside HTTP+JSON
    /// (`A2A_JSONRPC`: `1` or `0`, default `1`).
    pub jsonrpc: bool,
    /// Whether the gRPC binding is served (and listed in the card) on its own port
    /// (`A2A_GRPC`: `1` or `0`, default `1`).
    pub grpc: bool,
    /// `A2A_GRPC_PORT`: the gRPC port; unset, see [`ListenerConfig::grpc_bind_port`].
    pub grpc_port: Option<u16>,
    /// `A2A_TLS_CERT` and `A2A_TLS_KEY`: with both, every binding is served over TLS.
    pub tls: Option<TlsFiles>,
}

/// The listener's certificate chain and private key (PEM files).
#[derive(Debug, Clone, PartialEq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl ListenerConfig {
    /// Defaults for everything but the credentials file.
    pub fn new(credentials_path: PathBuf) -> Self {
        ListenerConfig {
            host: "127.0.0.1".into(),
            port: 8788,
            public_url: None,
            agent_name: "Pi resident agent".into(),
            agent_description: "A resident Pi coding agent that accepts work over A2A: each message becomes a durable Task, worked in its own Pi session.".into(),
            agent_version: env!("CARGO_PKG_VERSION").into(),
            credentials_path,
            blocking_timeout_ms: 60_000,
            executor_timeout_ms: 2_000,
            max_body_bytes: 1024 * 1024,
            max_connections: 256,
            idle_timeout_ms: 30_000,
            write_timeout_ms: 10_000,
            max_streams: 1024,
            max_streams_per_principal: 256,
            stream_coalesce_ms: 2,
            jsonrpc: true,
            grpc: true,
            grpc_port: None,
            tls: None,
        }
    }

    /// The port gRPC listens on (`None`: turned off). gRPC is HTTP/2 with its own framing,
    /// so it gets a port of its own beside the HTTP/1.1 one: `A2A_GRPC_PORT`, else the
    /// next port after a fixed `A2A_PORT`, else (A2A_PORT 0) an ephemeral one.
    pub fn grpc_bind_port(&self) -> Result<Option<u16>, ConfigError> {
        if !self.grpc {
            return Ok(None);
        }
        match (self.grpc_port, self.port) {
            (Some(port), _) => Ok(Some(port)),
            (None, 0) => Ok(Some(0)),
            (None, port) => port.checked_add(1).map(Some).ok_or_else(|| ConfigError {
                variable: "A2A_GRPC_PORT".into(),
                message: format!("A2A_PORT is {port}, so the gRPC port (A2A_PORT + 1 by default) does not exist: set A2A_GRPC_PORT, or A2A_GRPC=0"),
            }),
        }
    }

    /// Reads `A2A_*` variables; unset ones take their defaults, set but unusable ones are
    /// errors naming the variable.
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let credentials = var(env, "A2A_CREDENTIALS_PATH").ok_or_else(|| ConfigError {
            variable: "A2A_CREDENTIALS_PATH".into(),
            message: "is required when the listener runs: point it at a JSON file {\"credentials\": [{\"token\": \"...\", \"principal\": \"...\"}]}".into(),
        })?;
        let mut config = ListenerConfig::new(absolute("A2A_CREDENTIALS_PATH", credentials)?);
        if let Some(host) = var(env, "A2A_HOST") {
            config.host = host;
        }
        if let Some(port) = var(env, "A2A_PORT") {
            config.port = port.parse().map_err(|_| ConfigError {
                variable: "A2A_PORT".into(),
                message: format!("`{port}` is not a port number (0..=65535)"),
            })?;
        }
        if let Some(url) = var(env, "A2A_PUBLIC_URL") {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(ConfigError {
                    variable: "A2A_PUBLIC_URL".into(),
                    message: format!("`{url}` is not an http(s) URL"),
                });
            }
            config.public_url = Some(url.trim_end_matches('/').to_string());
        }
        if let Some(name) = var(env, "A2A_AGENT_NAME") {
            config.agent_name = name;
        }
        if let Some(description) = var(env, "A2A_AGENT_DESCRIPTION") {
            config.agent_description = description;
        }
        if let Some(version) = var(env, "A2A_AGENT_VERSION") {
            config.agent_version = version;
        }
        let number = |name: &str, min: u64, max: u64| -> Result<Option<u64>, ConfigError> {
            var(env, name)
                .map(|v| {
                    v.parse::<u64>()
                        .ok()
                        .filter(|n| (min..=max).contains(n))
                        .ok_or_else(|| ConfigError {
                            variable: name.into(),
                            message: format!("`{v}` is not a whole number in {min}..={max}"),
                        })
                })
                .transpose()
        };
        if let Some(ms) = number("A2A_BLOCKING_TIMEOUT_MS", 0, 3_600_000)? {
            config.blocking_timeout_ms = ms;
        }
        if let Some(ms) = number("A2A_EXECUTOR_TIMEOUT_MS", 1, 600_000)? {
            config.executor_timeout_ms = ms;
        }
        if let Some(bytes) = number("A2A_MAX_BODY_BYTES", 1024, 64 * 1024 * 1024)? {
            config.max_body_bytes = bytes as usize;
        }
        if let Some(n) = number("A2A_MAX_CONNECTIONS", 1, 65_536)? {
            config.max_connections = n as usize;
        }
        if let Some(ms) = number("A2A_IDLE_TIMEOUT_MS", 100, 3_600_000)? {
            config.idle_timeout_ms = ms;
        }
        if let Some(ms) = number("A2A_WRITE_TIMEOUT_MS", 100, 3_600_000)? {
            config.write_timeout_ms = ms;
        }
        if let Some(n) = number("A2A_MAX_STREAMS", 1, 65_536)? {
            config.max_streams = n as usize;
        }
        if let Some(n) = number("A2A_MAX_STREAMS_PER_PRINCIPAL", 1, 65_536)? {
            config.max_streams_per_principal = n as usize;
        }
        if let Some(ms) = number("A2A_STREAM_COALESCE_MS", 0, 1_000)? {
            config.stream_coalesce_ms = ms;
        }
        if let Some(value) = var(env, "A2A_JSONRPC") {
            config.jsonrpc = binding_switch("A2A_JSONRPC", &value)?;
        }
        if let Some(value) = var(env, "A2A_GRPC") {
            config.grpc = binding_switch("A2A_GRPC", &value)?;
        }
        if let Some(port) = var(env, "A2A_GRPC_PORT") {
            config.grpc_port = Some(port.parse().map_err(|_| ConfigError {
                variable: "A2A_GRPC_PORT".into(),
                message: format!("`{port}` is not a port number (0..=65535)"),
            })?);
        }
        config.grpc_bind_port()?;
        config.tls = tls_files(env)?;
        Ok(config)
    }
}

/// `A2A_TLS_CERT` and `A2A_TLS_KEY` go together: one alone would serve plain HTTP where
/// the operator asked for TLS.
fn tls_files(env: &dyn Fn(&str) -> Option<String>) -> Result<Option<TlsFiles>, ConfigError> {
    let missing = |set: &str, unset: &str| {
        ConfigError {
        variable: unset.into(),
        message: format!("is required with {set}: set both (the PEM certificate chain and its private key) to serve TLS, or neither for plain HTTP"),
    }
    };
    match (var(env, "A2A_TLS_CERT"), var(env, "A2A_TLS_KEY")) {
        (None, None) => Ok(None),
        (Some(_), None) => Err(missing("A2A_TLS_CERT", "A2A_TLS_KEY")),
        (None, Some(_)) => Err(missing("A2A_TLS_KEY", "A2A_TLS_CERT")),
        (Some(cert), Some(key)) => Ok(Some(TlsFiles {
            cert: absolute("A2A_TLS_CERT", cert)?,
            key: absolute("A2A_TLS_KEY", key)?,
        })),
    }
}

/// A binding's on/off variable: `1`/`true`/`on` or `0`/`false`/`off`.
fn binding_switch(variable: &str, value: &str) -> Result<bool, ConfigError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "on" => Ok(true),
        "0" | "false" | "off" => Ok(false),
        _ => Err(ConfigError {
            variable: variable.into(),
            message: format!("`{value}` is neither 1 (serve the binding) nor 0 (turn it off)"),
        }),
    }
}

/// An `A2A_*` variable given in code instead (an option of `A2AListener.start`): it
/// overrides the variable and is read under the same rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerOption {
    /// The option's name, for errors (`blockingTimeoutMs`).
    pub name: &'static str,
    pub variable: &'static str,
    /// `None` leaves the variable as the environment has it.
    pub value: Option<String>,
}

/// A listener configuration that does not hold, and the option it came from (if it came
/// from one rather than from the environment).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionError {
    pub option: Option<&'static str>,
    pub error: ConfigError,
}

impl std::fmt::Display for OptionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.option {
            Some(option) => write!(
                f,
                "invalid option `{option}` (the same rule as {}): {}",
                self.error.variable, self.error.message
            ),
            None => self.error.fmt(f),
        }
    }
}

impl std::error::Error for OptionError {}

impl ListenerConfig {
    /// The configuration with each given option overriding its variable, read by the one
    /// function that reads the environment ([`ListenerConfig::from_env`]), so that an option
    /// and its variable accept exactly the same values; an error names the option it came
    /// from.
    pub fn with_options(
        options: &[ListenerOption],
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, OptionError> {
        let given = |variable: &str| {
            options
                .iter()
                .find(|o| o.variable == variable && o.value.is_some())
        };
        let overlay = |variable: &str| match given(variable) {
            Some(option) => option.value.clone(),
            None => env(variable),
        };
        ListenerConfig::from_env(&overlay).map_err(|error| OptionError {
            option: given(&error.variable).map(|o| o.name),
            error,
        })
    }
}

/// Whether `A2A_SERVER` asks for the listener (`1` or `true`; `0`, `false` or unset: no).
pub fn listener_enabled(env: &dyn Fn(&str) -> Option<String>) -> Result<bool, ConfigError> {
    match var(env, "A2A_SERVER").as_deref() {
        None | Some("0") | Some("false") => Ok(false),
        Some("1") | Some("true") => Ok(true),
        Some(other) => Err(ConfigError {
            variable: "A2A_SERVER".into(),
            message: format!("`{other}` is neither 1/true nor 0/false"),
        }),
    }
}

/// Warnings about the environment, shown once at startup.
pub fn startup_warnings(env: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    let mut warnings = Vec::new();
    if let Some(legacy) = var(env, "A2A_STORE_PATH") {
        warnings.push(format!(
            "A2A_STORE_PATH ({legacy}) is the legacy 1.7 standalone A2A store and is not merged into the task-plane store: \
             finish or export its active tasks and keep the file as an archive; new work uses the task-plane store \
             (CHANNELS_TASK_STORE_PATH or the default root)"
        ));
    }
    warnings
}
