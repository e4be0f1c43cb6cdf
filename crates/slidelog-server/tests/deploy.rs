//! The files of `deploy/` against the real binary and real checkers: the
//! Kubernetes manifests pass `kubernetes-validate --strict` (schemas shipped
//! with it, `target/k8s-venv`, made by scripts/test.sh) and agree with the
//! settings they mount; a `serve` started from the ConfigMap's settings
//! answers the probes; every descriptor deploy/envoy/envoy.yaml sends is
//! limited by deploy/envoy/ratelimit.yaml on a running `serve`; the systemd
//! unit passes `systemd-analyze verify`.

mod common;

use common::{child, raw_http};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Every YAML document of `text`, as JSON values.
fn yaml_docs(text: &str) -> Vec<Value> {
    text.split("\n---\n")
        .map(|doc| serde_saphyr::from_str::<Value>(doc).expect("YAML"))
        .collect()
}

fn kind<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind}/{name}"))
}

#[test]
fn kubernetes_manifests_pass_the_schema_checker() {
    let checker = root().join("target/k8s-venv/bin/kubernetes-validate");
    assert!(
        checker.exists(),
        "{} is missing: run scripts/test.sh --install-only",
        checker.display()
    );
    let files = ["configmap.yaml", "deployment.yaml", "service.yaml"];
    let out = Command::new(&checker)
        .arg("--strict")
        .args(files.map(|f| root().join("deploy/kubernetes").join(f)))
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert_eq!(said.matches(" passed for resource ").count(), 4, "{said}");
    // The checker refuses what it should: a missing required field.
    let broken = read("deploy/kubernetes/deployment.yaml")
        .replace("containerPort: 8080", "containerPortt: 8080");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("broken.yaml"), broken).unwrap();
    let out = Command::new(&checker)
        .args([
            "--strict".as_ref(),
            dir.path().join("broken.yaml").as_os_str(),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
}

#[test]
fn the_deployment_is_non_root_probed_scraped_and_matches_its_service() {
    let docs = yaml_docs(&read("deploy/kubernetes/deployment.yaml"));
    let pod = &kind(&docs, "Deployment", "slidelog")["spec"]["template"];
    let annotations = &pod["metadata"]["annotations"];
    assert_eq!(annotations["prometheus.io/scrape"], "true");
    assert_eq!(annotations["prometheus.io/port"], "8080");
    assert_eq!(annotations["prometheus.io/path"], "/metrics");
    let spec = &pod["spec"];
    assert_eq!(spec["securityContext"]["runAsNonRoot"], true);
    assert_eq!(spec["securityContext"]["runAsUser"], 65532);
    let c = &spec["containers"][0];
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert!(
        c["resources"]["requests"]["cpu"].is_string()
            && c["resources"]["requests"]["memory"].is_string()
    );
    let ports: Vec<(&str, u64)> = c["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap(),
                p["containerPort"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(ports, [("http", 8080), ("grpc", 8081)]);
    assert_eq!(c["volumeMounts"][0]["mountPath"], "/etc/slidelog");
    let service = yaml_docs(&read("deploy/kubernetes/service.yaml"));
    let service = &kind(&service, "Service", "slidelog")["spec"];
    let targets: Vec<&str> = service["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["targetPort"].as_str().unwrap())
        .collect();
    assert_eq!(targets, ["http", "grpc"]);
    assert_eq!(service["selector"], pod["metadata"]["labels"]);
}

/// The ConfigMap's settings.toml, written to a file.
fn configmap_settings() -> (tempfile::TempDir, PathBuf) {
    let docs = yaml_docs(&read("deploy/kubernetes/configmap.yaml"));
    let data = &kind(&docs, "ConfigMap", "slidelog")["data"];
    let dir = tempfile::tempdir().unwrap();
    let settings = dir.path().join("settings.toml");
    std::fs::write(&settings, data["settings.toml"].as_str().unwrap()).unwrap();
    (dir, settings)
}

#[test]
fn the_configmap_carries_the_deploy_files_and_settings_serve_accepts() {
    let docs = yaml_docs(&read("deploy/kubernetes/configmap.yaml"));
    let data = &kind(&docs, "ConfigMap", "slidelog")["data"];
    let ratelimit = data["ratelimit.yaml"].as_str().unwrap();
    assert_eq!(ratelimit, read("deploy/envoy/ratelimit.yaml"));
    let envoy = &kind(&docs, "ConfigMap", "slidelog-envoy")["data"]["envoy.yaml"];
    assert_eq!(envoy.as_str().unwrap(), read("deploy/envoy/envoy.yaml"));
    let (_dir, settings) = configmap_settings();
    let out = Command::new(env!("CARGO_BIN_EXE_slidelog"))
        .args(["serve", "--print-settings", "--settings"])
        .arg(&settings)
        .env_remove("SLIDELOG_STORE")
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // What the Deployment's ports and probes expect.
    common::shows(
        &printed,
        &[
            "http = \"0.0.0.0:8080\"  # settings file",
            "grpc = \"0.0.0.0:8081\"  # settings file",
            "config = \"/etc/slidelog/ratelimit.yaml\"  # settings file",
        ],
    );
}

#[test]
fn a_serve_from_the_configmap_settings_answers_the_probes() {
    let (_dir, settings) = configmap_settings();
    // The same settings on loopback ports, with the rate limit config where
    // this checkout has it (flags override the file): the probes answer.
    let mut command = Command::new(env!("CARGO_BIN_EXE_slidelog"));
    command
        .args([
            "serve",
            "--http",
            "127.0.0.1:0",
            "--grpc",
            "127.0.0.1:0",
            "--settings",
        ])
        .arg(&settings)
        .arg("--config")
        .arg(root().join("deploy/envoy/ratelimit.yaml"))
        // The child helper reads the text log's listening line.
        .args(["--log-format", "text"])
        .env_remove("SLIDELOG_STORE");
    let service = child::spawn(command);
    assert_eq!(raw_http::get(&service.addr, "/healthz").0, 200);
    assert_eq!(raw_http::get(&service.addr, "/readyz").0, 200);
    let (status, metrics) = raw_http::get(&service.addr, "/metrics");
    assert_eq!(status, 200);
    assert!(metrics.contains("slidelog_"), "{metrics}");
}

/// One rate limit policy of envoy.yaml as slidelog receives it: the
/// descriptor's entries (header values made up), its cost, whether it is
/// sent at stream end.
struct Policy {
    entries: Vec<(String, String)>,
    hits_addend: Option<u64>,
    on_stream_done: bool,
}

fn policies(envoy: &Value) -> Vec<Policy> {
    let mut out = Vec::new();
    let hcm = &envoy["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"];
    for host in hcm["route_config"]["virtual_hosts"].as_array().unwrap() {
        for route in host["routes"].as_array().unwrap() {
            let path = route["match"]["path"]
                .as_str()
                .or(route["match"]["prefix"].as_str())
                .unwrap();
            for limit in route["route"]["rate_limits"]
                .as_array()
                .into_iter()
                .flatten()
            {
                let entries = limit["actions"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| entry(a, path))
                    .collect();
                out.push(Policy {
                    entries,
                    hits_addend: limit["hits_addend"]["number"].as_u64(),
                    on_stream_done: limit["apply_on_stream_done"] == true,
                });
            }
        }
    }
    out
}

/// The descriptor entry an Envoy action makes from a request to `path`.
fn entry(action: &Value, path: &str) -> (String, String) {
    if let Some(h) = action.get("request_headers") {
        let value = if h["header_name"] == ":path" {
            path.to_owned()
        } else {
            "key-123".to_owned()
        };
        (h["descriptor_key"].as_str().unwrap().to_owned(), value)
    } else if let Some(g) = action.get("generic_key") {
        let key = g["descriptor_key"].as_str().unwrap_or("generic_key");
        (
            key.to_owned(),
            g["descriptor_value"].as_str().unwrap().to_owned(),
        )
    } else if action.get("remote_address").is_some() {
        ("remote_address".into(), "10.1.2.3".into())
    } else {
        panic!("an action this test does not know: {action}")
    }
}

/// Checks envoy.yaml's rate limit filter and its gRPC cluster to slidelog;
/// returns the filter's domain.
fn rate_limit_domain(envoy: &Value) -> String {
    let hcm = &envoy["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0];
    assert_eq!(hcm["name"], "envoy.filters.network.http_connection_manager");
    let filters = hcm["typed_config"]["http_filters"].as_array().unwrap();
    let rl = filters
        .iter()
        .find(|f| f["name"] == "envoy.filters.http.ratelimit")
        .expect("the rate limit filter");
    let rl = &rl["typed_config"];
    let cluster_name = &rl["rate_limit_service"]["grpc_service"]["envoy_grpc"]["cluster_name"];
    assert_eq!(rl["rate_limit_service"]["transport_api_version"], "V3");
    let clusters = envoy["static_resources"]["clusters"].as_array().unwrap();
    let cluster = clusters
        .iter()
        .find(|c| &c["name"] == cluster_name)
        .expect("the rate limit cluster");
    let options = &cluster["typed_extension_protocol_options"]["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"];
    assert!(
        options["explicit_http_config"]["http2_protocol_options"].is_object(),
        "gRPC needs HTTP/2: {cluster}"
    );
    let port = &cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]
        ["socket_address"]["port_value"];
    assert_eq!(port, 8081, "slidelog's gRPC port");
    rl["domain"].as_str().unwrap().to_owned()
}

#[test]
fn every_descriptor_envoy_sends_is_limited_by_the_deploy_config() {
    let envoy = yaml_docs(&read("deploy/envoy/envoy.yaml")).remove(0);
    let domain = rate_limit_domain(&envoy);

    let policies = policies(&envoy);
    assert!(
        policies.iter().any(|p| p.on_stream_done),
        "a stream-done (token usage) policy"
    );
    assert!(
        policies.iter().any(|p| p.hits_addend == Some(0)),
        "a look at the token budget"
    );
    let config = root().join("deploy/envoy/ratelimit.yaml");
    let service = child::serve(&["--config", config.to_str().unwrap()]);
    for policy in &policies {
        let entries: Vec<Value> = policy
            .entries
            .iter()
            .map(|(k, v)| json!({"key": k, "value": v}))
            .collect();
        let mut descriptor = json!({"entries": entries});
        if let Some(n) = policy.hits_addend {
            descriptor["hits_addend"] = json!(n);
        }
        let body =
            json!({"domain": domain, "descriptors": [descriptor], "hits_addend": 5}).to_string();
        let (status, answer) = raw_http::request(&service.addr, "POST", "/json", &body, "");
        assert_eq!(status, 200, "{body}: {answer}");
        let answer: Value = serde_json::from_str(&answer).unwrap();
        // Limited by a rule of the config, not answered unlimited.
        let limit = &answer["statuses"][0]["currentLimit"]["requestsPerUnit"];
        assert!(
            limit.as_u64().is_some_and(|n| n > 0),
            "{:?} is not limited: {answer}",
            policy.entries
        );
    }
}

#[test]
fn the_systemd_unit_passes_systemd_analyze_verify() {
    let unit = read("deploy/systemd/slidelog.service");
    assert!(unit.contains(
        "ExecStart=/usr/local/bin/slidelog serve --settings /etc/slidelog/settings.toml"
    ));
    assert!(unit.contains("DynamicUser=yes") && unit.contains("NoNewPrivileges=yes"));
    // verify checks the unit inside a root that has what it names: the
    // binary at its path, kill for ExecReload, systemd's own units.
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    for sub in [
        "usr/local/bin",
        "bin",
        "etc/systemd/system",
        "usr/lib/systemd",
    ] {
        std::fs::create_dir_all(r.join(sub)).unwrap();
    }
    std::fs::copy(
        env!("CARGO_BIN_EXE_slidelog"),
        r.join("usr/local/bin/slidelog"),
    )
    .unwrap();
    std::fs::copy("/bin/kill", r.join("bin/kill")).unwrap();
    std::fs::write(r.join("etc/systemd/system/slidelog.service"), &unit).unwrap();
    let copied = Command::new("cp")
        .arg("-a")
        .arg("/usr/lib/systemd/system")
        .arg(r.join("usr/lib/systemd/"))
        .status()
        .unwrap();
    assert!(copied.success());
    let verify = |name: &str| {
        Command::new("systemd-analyze")
            .arg("verify")
            .arg(format!("--root={}", r.display()))
            .arg(r.join("etc/systemd/system").join(name))
            .output()
            .expect("systemd-analyze (apt-get install systemd)")
    };
    let out = verify("slidelog.service");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.trim().is_empty(), "{stderr}");
    // It does complain, on stderr, about what is wrong.
    std::fs::write(
        r.join("etc/systemd/system/typo.service"),
        unit.replace("NoNewPrivileges", "NoNewPrivilege"),
    )
    .unwrap();
    let stderr = String::from_utf8_lossy(&verify("typo.service").stderr).into_owned();
    assert!(stderr.contains("Unknown key 'NoNewPrivilege'"), "{stderr}");
}
