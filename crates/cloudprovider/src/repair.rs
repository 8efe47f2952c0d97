//! Node repair policies (upstream's `RepairPolicy`, gate `NodeRepair`): which Node conditions,
//! held how long, make a node unhealthy enough to replace.
//!
//! Responsibility: the plain values a provider hands core ([`RepairPolicies`]), their defaults
//! for Cluster API, and the text form of the `--node-repair-policies` setting
//! (`Ready=False:30m,Ready=Unknown:30m`), parsed strictly: every entry names a condition type,
//! one of `True`, `False`, `Unknown`, and a toleration (`90s`, `30m`, `1h`, or a combination
//! such as `1h30m`); a bad entry is an error naming it.
//! Inputs: the setting's text. Outputs: [`RepairPolicies`], or an error.

use std::fmt;
use std::time::Duration;

/// One repair policy: a Node whose condition `condition_type` has had status
/// `condition_status` for `toleration` is unhealthy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairPolicy {
    /// The Node condition type (`Ready`, `KernelDeadlock`, …).
    pub condition_type: String,
    /// The status that is unhealthy: `True`, `False` or `Unknown`.
    pub condition_status: String,
    /// How long the condition may hold that status before the node is repaired.
    pub toleration: Duration,
}

/// What a provider repairs: Node conditions, and (Cluster API) a NodeClaim whose Node is gone
/// while its instance stays.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepairPolicies {
    /// The Node condition policies, in order (on an exact tie the first wins).
    pub conditions: Vec<RepairPolicy>,
    /// How long a registered NodeClaim may be without its Node (deleted while the instance —
    /// for Cluster API the Machine — still exists) before it is repaired; `None`: never.
    pub node_deleted: Option<Duration>,
}

impl RepairPolicies {
    /// Whether there is nothing to repair (core then runs no repair controller, as upstream
    /// registers none for an empty list).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.conditions.is_empty() && self.node_deleted.is_none()
    }

    /// The defaults for Cluster API: `Ready` `False` or `Unknown` for 30 minutes (upstream's
    /// AWS defaults for `Ready`), and a Node deleted under a live Machine for 5 minutes.
    #[must_use]
    pub fn cluster_api_defaults() -> Self {
        Self {
            conditions: DEFAULT_CONDITIONS
                .parse::<Conditions>()
                .map(|c| c.0)
                .unwrap_or_default(),
            node_deleted: Some(DEFAULT_NODE_DELETED),
        }
    }
}

/// The default `--node-repair-policies`.
pub const DEFAULT_CONDITIONS: &str = "Ready=False:30m,Ready=Unknown:30m";
/// The default `--node-repair-node-deleted-toleration`.
pub const DEFAULT_NODE_DELETED: Duration = Duration::from_secs(300);

/// The `--node-repair-policies` list: `Type=Status:duration`, comma separated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Conditions(pub Vec<RepairPolicy>);

impl std::str::FromStr for Conditions {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut out: Vec<RepairPolicy> = Vec::new();
        for entry in s.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let bad = |why: &str| format!("node repair policy {entry:?}: {why}");
            let (condition, toleration) = entry
                .rsplit_once(':')
                .ok_or_else(|| bad("expected Type=Status:duration, e.g. Ready=False:30m"))?;
            let (condition_type, status) = condition
                .split_once('=')
                .ok_or_else(|| bad("expected Type=Status:duration, e.g. Ready=False:30m"))?;
            let condition_type = condition_type.trim();
            if condition_type.is_empty()
                || !condition_type
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '/'))
            {
                return Err(bad("the condition type must be a non-empty name"));
            }
            let status = status.trim();
            if !["True", "False", "Unknown"].contains(&status) {
                return Err(bad("the status must be True, False or Unknown"));
            }
            let toleration = parse_duration(toleration.trim()).map_err(|e| bad(&e))?;
            if out
                .iter()
                .any(|p| p.condition_type == condition_type && p.condition_status == status)
            {
                return Err(bad("the condition and status are listed twice"));
            }
            out.push(RepairPolicy {
                condition_type: condition_type.to_owned(),
                condition_status: status.to_owned(),
                toleration,
            });
        }
        Ok(Self(out))
    }
}

impl fmt::Display for Conditions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.0.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            write!(
                f,
                "{sep}{}={}:{}s",
                p.condition_type,
                p.condition_status,
                p.toleration.as_secs()
            )?;
        }
        Ok(())
    }
}

/// A Go-style duration of hours, minutes and seconds (`1h30m`, `90s`, `0s`); at least one
/// unit, integers only.
///
/// # Errors
/// When the text is not such a duration.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let invalid = || format!("{text:?} is not a duration such as 90s, 30m or 1h30m");
    if text.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    let mut digits = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit = match c {
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => return Err(invalid()),
        };
        let n: u64 = digits.parse().map_err(|_| invalid())?;
        total = n
            .checked_mul(unit)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(invalid)?;
        digits.clear();
    }
    if !digits.is_empty() {
        return Err(invalid());
    }
    Ok(Duration::from_secs(total))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parses_the_default_list() {
        let c: Conditions = DEFAULT_CONDITIONS.parse().unwrap();
        assert_eq!(
            c.0,
            vec![
                RepairPolicy {
                    condition_type: "Ready".into(),
                    condition_status: "False".into(),
                    toleration: Duration::from_secs(1800),
                },
                RepairPolicy {
                    condition_type: "Ready".into(),
                    condition_status: "Unknown".into(),
                    toleration: Duration::from_secs(1800),
                },
            ]
        );
        assert_eq!(c.to_string(), "Ready=False:1800s,Ready=Unknown:1800s");
        let defaults = RepairPolicies::cluster_api_defaults();
        assert_eq!(defaults.conditions, c.0);
        assert_eq!(defaults.node_deleted, Some(Duration::from_secs(300)));
    }

    #[test]
    fn reads_other_conditions_and_durations() {
        let c: Conditions = " KernelDeadlock=True:1h30m , example.com/Disk=False:45s"
            .parse()
            .unwrap();
        assert_eq!(c.0.len(), 2);
        assert_eq!(c.0[0].toleration, Duration::from_secs(5400));
        assert_eq!(c.0[1].condition_type, "example.com/Disk");
        assert_eq!("".parse::<Conditions>().unwrap(), Conditions::default());
        assert!(RepairPolicies::default().is_empty());
    }

    #[test]
    fn refuses_bad_entries_naming_them() {
        for (text, why) in [
            ("Ready", "expected Type=Status:duration"),
            ("Ready=False", "expected Type=Status:duration"),
            ("=False:5m", "non-empty name"),
            ("Ready=false:5m", "True, False or Unknown"),
            ("Ready=False:5", "not a duration"),
            ("Ready=False:1.5h", "not a duration"),
            ("Ready=False:5d", "not a duration"),
            ("Ready=False:5m,Ready=False:6m", "listed twice"),
        ] {
            let e = text.parse::<Conditions>().unwrap_err();
            assert!(e.contains(why), "{text}: {e}");
            assert!(e.contains("node repair policy"), "{text}: {e}");
        }
    }
}
