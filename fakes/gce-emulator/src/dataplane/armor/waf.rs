//! Cloud Armor's preconfigured WAF rules (`evaluatePreconfiguredWaf('sqli-v33-stable',
//! {'sensitivity': 1})`, `evaluatePreconfiguredExpr('xss-v33-stable', [...])`) run as what they
//! are: the OWASP ModSecurity Core Rule Set 3.3 (Debian's `modsecurity-crs`, 3.3.4) in
//! libmodsecurity 3 (Debian's `libmodsecurity3`), through the `modsecurity-sys` binding.
//!
//! Semantics (Cloud Armor docs, "Tune preconfigured WAF rules" and "Preconfigured WAF rules
//! overview"): a rule set matches when any of its signatures matches; each signature has a
//! sensitivity equal to its CRS paranoia level and a rule runs the signatures at or below the
//! chosen sensitivity (default 4: all); sensitivity 0 runs only `opt_in_rule_ids`;
//! `opt_out_rule_ids` leave signatures out. Signature ids are Google's names for CRS rules,
//! `owasp-crs-v030301-id942100-sqli` for CRS rule 942100.
//!
//! How: one libmodsecurity rule set per (rule set, sensitivity, opt-outs, opt-ins), built on first
//! use from `REQUEST-901-INITIALIZATION.conf` (with `tx.paranoia_level` = sensitivity) and the rule
//! set's CRS file, opt-outs removed with `SecRuleRemoveById`. CRS runs in anomaly-scoring mode,
//! so its detection rules never block by themselves: every matching rule is reported through
//! libmodsecurity's log callback, and the CRS ids of the rule set's file that were reported are
//! the signatures that matched. Request bodies are not inspected (only the URI, query and
//! headers), a documented difference.

use std::collections::HashMap;
use std::ffi::{c_void, CStr, CString};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, OnceLock};

use modsecurity_sys as msc;

/// Where Debian's `modsecurity-crs` puts the CRS 3.3 rules; `GCE_EMULATOR_CRS_DIR` overrides it.
pub const CRS_RULES_DIR: &str = "/usr/share/modsecurity-crs/rules";

/// What a missing rule set costs the user: the install command.
pub const INSTALL_HINT: &str = "apt-get install libmodsecurity3 modsecurity-crs (make deps)";

/// A preconfigured WAF rule as a rule's expression names it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WafRule {
    /// The rule set, e.g. `sqli-v33-stable`.
    pub set: String,
    /// Sensitivity 0-4 (CRS paranoia level); 4 when not given.
    pub sensitivity: u8,
    /// CRS ids left out (`opt_out_rule_ids`).
    pub opt_out: Vec<u32>,
    /// CRS ids run at sensitivity 0 (`opt_in_rule_ids`).
    pub opt_in: Vec<u32>,
}

/// The CRS file and Google's id suffix of a rule set name (`sqli-v33-stable`, also `-canary`
/// and the older names without `-v33`, which this emulator runs with the same 3.3 rules).
pub fn category(set: &str) -> Option<(&'static str, &'static str)> {
    let base = set
        .strip_suffix("-stable")
        .or_else(|| set.strip_suffix("-canary"))?;
    let base = base.strip_suffix("-v33").unwrap_or(base);
    Some(match base {
        "sqli" => ("REQUEST-942-APPLICATION-ATTACK-SQLI.conf", "sqli"),
        "xss" => ("REQUEST-941-APPLICATION-ATTACK-XSS.conf", "xss"),
        "lfi" => ("REQUEST-930-APPLICATION-ATTACK-LFI.conf", "lfi"),
        "rfi" => ("REQUEST-931-APPLICATION-ATTACK-RFI.conf", "rfi"),
        "rce" => ("REQUEST-932-APPLICATION-ATTACK-RCE.conf", "rce"),
        "php" => ("REQUEST-933-APPLICATION-ATTACK-PHP.conf", "php"),
        "nodejs" => ("REQUEST-934-APPLICATION-ATTACK-NODEJS.conf", "nodejs"),
        "java" => ("REQUEST-944-APPLICATION-ATTACK-JAVA.conf", "java"),
        "sessionfixation" => (
            "REQUEST-943-APPLICATION-ATTACK-SESSION-FIXATION.conf",
            "sessionfixation",
        ),
        "scannerdetection" => ("REQUEST-913-SCANNER-DETECTION.conf", "scannerdetection"),
        "protocolattack" => ("REQUEST-921-PROTOCOL-ATTACK.conf", "protocolattack"),
        "methodenforcement" => ("REQUEST-911-METHOD-ENFORCEMENT.conf", "methodenforcement"),
        _ => return None,
    })
}

/// Google's signature id of CRS rule `id` in the set with `suffix`.
pub fn signature_id(id: u32, suffix: &str) -> String {
    format!("owasp-crs-v030301-id{id}-{suffix}")
}

/// The CRS rule id of a signature id (`owasp-crs-v030301-id942100-sqli` -> 942100).
pub fn crs_id(signature: &str) -> Option<u32> {
    let rest = &signature[signature.find("-id")? + 3..];
    rest.split('-').next()?.parse().ok()
}

/// The request as the WAF sees it.
#[derive(Debug)]
pub struct WafRequest<'a> {
    /// Client address and port.
    pub client: (IpAddr, u16),
    /// Method.
    pub method: &'a str,
    /// Path and query as sent.
    pub uri: &'a str,
    /// Request headers.
    pub headers: &'a http::HeaderMap,
}

struct Engine(*mut msc::ModSecurity);
// SAFETY: libmodsecurity's engine object is read-only after msc_init and the log callback are
// set; transactions are created per request.
unsafe impl Send for Engine {}
unsafe impl Sync for Engine {}

struct RuleSet {
    rules: *mut msc::RulesSet,
    ids: Vec<u32>,
    suffix: &'static str,
    /// One transaction at a time per rule set.
    lock: Mutex<()>,
}
// SAFETY: the rule set is only read after loading, under `lock`.
unsafe impl Send for RuleSet {}
unsafe impl Sync for RuleSet {}

impl Drop for RuleSet {
    fn drop(&mut self) {
        // SAFETY: created by msc_create_rules_set, dropped once.
        unsafe { msc::msc_rules_cleanup(self.rules) };
    }
}

unsafe extern "C" fn log_cb(data: *mut c_void, msg: *const c_void) {
    if data.is_null() || msg.is_null() {
        return;
    }
    // SAFETY: `data` is the `Vec<String>` the transaction was created with, alive for its whole
    // life; `msg` is a NUL-terminated string owned by libmodsecurity for this call.
    let out = unsafe { &mut *(data as *mut Vec<String>) };
    let s = unsafe { CStr::from_ptr(msg as *const std::os::raw::c_char) };
    out.push(s.to_string_lossy().into_owned());
}

fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        // SAFETY: plain constructor calls of the C API.
        let ms = unsafe { msc::msc_init() };
        let info = CString::new("gce-emulator").expect("no NUL");
        unsafe {
            msc::msc_set_connector_info(ms, info.as_ptr());
            msc::msc_set_log_cb(ms, Some(log_cb));
        }
        Engine(ms)
    })
}

fn crs_dir() -> String {
    std::env::var("GCE_EMULATOR_CRS_DIR").unwrap_or_else(|_| CRS_RULES_DIR.to_string())
}

/// CRS rule ids defined in a rule file (`id:942100`).
fn ids_in(text: &str) -> Vec<u32> {
    let re = regex::Regex::new(r#"(?m)["\s,]id:(\d+)"#).expect("valid regex");
    re.captures_iter(text)
        .filter_map(|c| c[1].parse().ok())
        .collect()
}

fn load(rule: &WafRule) -> Result<RuleSet, String> {
    let (file, suffix) = category(&rule.set)
        .ok_or_else(|| format!("unknown preconfigured WAF rule set {:?}", rule.set))?;
    let dir = crs_dir();
    let path = format!("{dir}/{file}");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!("cannot read the OWASP CRS 3.3 rule file {path}: {e}; install it: {INSTALL_HINT}")
    })?;
    let ids = ids_in(&text);
    let pl = if rule.sensitivity == 0 {
        4
    } else {
        rule.sensitivity
    };
    // `SecRequestBodyAccess On` although no body is passed: libmodsecurity 3.0.9 skips phase 2
    // (where most CRS detection rules run, ARGS included) when request body access is off.
    let mut conf = format!(
        "SecRuleEngine On\n\
         SecRequestBodyAccess On\n\
         SecDefaultAction \"phase:1,log,pass\"\n\
         SecDefaultAction \"phase:2,log,pass\"\n\
         SecAction \"id:900000,phase:1,nolog,pass,t:none,setvar:tx.paranoia_level={pl}\"\n\
         SecAction \"id:900990,phase:1,nolog,pass,t:none,setvar:tx.crs_setup_version=334\"\n\
         Include {dir}/REQUEST-901-INITIALIZATION.conf\n\
         Include {path}\n"
    );
    let removed: Vec<u32> = if rule.sensitivity == 0 {
        // Only the opted-in signatures (and the paranoia-level markers, which never log).
        ids.iter()
            .copied()
            .filter(|id| !rule.opt_in.contains(id))
            .collect()
    } else {
        rule.opt_out.clone()
    };
    for id in removed {
        conf.push_str(&format!("SecRuleRemoveById {id}\n"));
    }
    // SAFETY: C API calls on a rule set we own; `err` is set by libmodsecurity on failure.
    let rules = unsafe { msc::msc_create_rules_set() };
    let c = CString::new(conf).map_err(|e| e.to_string())?;
    let mut err: *const std::os::raw::c_char = std::ptr::null();
    let n = unsafe { msc::msc_rules_add(rules, c.as_ptr(), &mut err) };
    if n < 0 {
        let why = if err.is_null() {
            "unknown error".to_string()
        } else {
            unsafe { CStr::from_ptr(err) }
                .to_string_lossy()
                .into_owned()
        };
        unsafe { msc::msc_rules_cleanup(rules) };
        return Err(format!(
            "libmodsecurity refused the CRS rules for {}: {why}",
            rule.set
        ));
    }
    Ok(RuleSet {
        rules,
        ids,
        suffix,
        lock: Mutex::new(()),
    })
}

fn rule_set(rule: &WafRule) -> Result<Arc<RuleSet>, String> {
    static SETS: OnceLock<Mutex<HashMap<WafRule, Arc<RuleSet>>>> = OnceLock::new();
    let sets = SETS.get_or_init(Default::default);
    if let Some(s) = sets.lock().expect("poisoned").get(rule) {
        return Ok(s.clone());
    }
    let s = Arc::new(load(rule)?);
    sets.lock()
        .expect("poisoned")
        .insert(rule.clone(), s.clone());
    Ok(s)
}

/// Runs `rule` on `req`: the signature ids that matched (empty: no match), sorted.
///
/// Errors: an unknown rule set, or the CRS files or libmodsecurity missing (the message says
/// what to install).
pub fn evaluate(rule: &WafRule, req: &WafRequest<'_>) -> Result<Vec<String>, String> {
    if rule.sensitivity == 0 && rule.opt_in.is_empty() {
        category(&rule.set)
            .ok_or_else(|| format!("unknown preconfigured WAF rule set {:?}", rule.set))?;
        return Ok(Vec::new());
    }
    let set = rule_set(rule)?;
    let ms = engine();
    let mut messages: Vec<String> = Vec::new();
    let cstr = |s: &str| CString::new(s.replace('\0', "")).expect("NULs removed");
    let client = cstr(&req.client.0.to_string());
    let server = cstr("127.0.0.1");
    let uri = cstr(req.uri);
    let method = cstr(req.method);
    let version = cstr("1.1");
    let _guard = set.lock.lock().expect("poisoned");
    // SAFETY: the transaction lives within this block; every pointer passed outlives the calls
    // that use it; `messages` outlives the transaction that writes to it through log_cb.
    unsafe {
        let t = msc::msc_new_transaction(
            ms.0,
            set.rules,
            &mut messages as *mut Vec<String> as *mut c_void,
        );
        msc::msc_process_connection(
            t,
            client.as_ptr(),
            i32::from(req.client.1),
            server.as_ptr(),
            80,
        );
        msc::msc_process_uri(t, uri.as_ptr(), method.as_ptr(), version.as_ptr());
        for (name, value) in req.headers {
            msc::msc_add_n_request_header(
                t,
                name.as_str().as_ptr(),
                name.as_str().len(),
                value.as_bytes().as_ptr(),
                value.as_bytes().len(),
            );
        }
        msc::msc_process_request_headers(t);
        msc::msc_process_request_body(t);
        msc::msc_process_logging(t);
        msc::msc_transaction_cleanup(t);
    }
    let id_re = regex::Regex::new(r#"\[id "(\d+)"\]"#).expect("valid regex");
    let mut hits: Vec<u32> = messages
        .iter()
        .filter_map(|m| id_re.captures(m)?.get(1)?.as_str().parse().ok())
        .filter(|id| set.ids.contains(id))
        .collect();
    hits.sort_unstable();
    hits.dedup();
    Ok(hits
        .into_iter()
        .map(|id| signature_id(id, set.suffix))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_ids() {
        assert_eq!(category("sqli-v33-stable").map(|c| c.1), Some("sqli"));
        assert_eq!(category("xss-v33-canary").map(|c| c.1), Some("xss"));
        assert_eq!(category("nope-v33-stable"), None);
        assert_eq!(
            signature_id(942100, "sqli"),
            "owasp-crs-v030301-id942100-sqli"
        );
        assert_eq!(crs_id("owasp-crs-v030301-id942100-sqli"), Some(942100));
        assert_eq!(crs_id("garbage"), None);
    }
}
