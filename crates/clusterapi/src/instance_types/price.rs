//! The NodeClass price table (`spec.prices`).
//!
//! Responsibility: validate the table once and answer "what does an offering of this instance
//! type, MachineDeployment, zone and capacity type cost" for offerings whose MachineDeployment
//! carries no price annotation.
//! Inputs: the NodeClass spec, then an offering's facts. Outputs: a price and the index of the
//! entry that set it, or a [`NodeClassError`].
//!
//! An entry applies when every criterion it sets equals the offering's. Of the entries that
//! apply, one naming the MachineDeployment beats any that does not; then more criteria beat
//! fewer; then the first listed wins. So a catch-all entry (`{price: "0.1"}`) is a default, an
//! instance-type entry refines it, and an MD entry overrides both.

use api::nodeclass::{ClusterAPINodeClassSpec, PRICED_CAPACITY_TYPES, PriceEntry};

use super::{MachineDeploymentRef, NodeClassError};
use crate::annotations::parse_price_text;

/// A validated price table.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PriceTable {
    entries: Vec<Row>,
}

#[derive(Debug, Clone, PartialEq)]
struct Row {
    instance_type: Option<String>,
    machine_deployment: Option<MachineDeploymentRef>,
    zone: Option<String>,
    capacity_type: Option<String>,
    price: f64,
}

/// The facts of one offering a price entry is matched against.
#[derive(Debug, Clone, Copy)]
pub struct OfferingFacts<'a> {
    /// The instance type's name.
    pub instance_type: &'a str,
    /// The MachineDeployment behind it.
    pub machine_deployment: &'a MachineDeploymentRef,
    /// Its zone (`""` when unknown; then no zone criterion matches).
    pub zone: &'a str,
    /// Its capacity type.
    pub capacity_type: &'a str,
}

impl Row {
    fn parse(index: usize, entry: &PriceEntry) -> Result<Self, NodeClassError> {
        let field = |name: &str| format!("prices[{index}].{name}");
        let price = parse_price_text(entry.price.trim()).ok_or_else(|| NodeClassError {
            field: field("price"),
            message: format!(
                "{:?} is not a non-negative decimal number such as 0.192",
                entry.price
            ),
        })?;
        let group = |text: &String, name: &str, kind: api::GroupKind| match text.split_once('/') {
            Some((namespace, group))
                if !namespace.is_empty() && !group.is_empty() && !group.contains('/') =>
            {
                Ok(MachineDeploymentRef {
                    namespace: namespace.to_owned(),
                    name: group.to_owned(),
                    kind,
                })
            }
            _ => Err(NodeClassError {
                field: field(name),
                message: format!("{text:?} is not namespace/name"),
            }),
        };
        let named = [
            (
                &entry.machine_deployment,
                "machineDeployment",
                api::GroupKind::MachineDeployment,
            ),
            (&entry.machine_set, "machineSet", api::GroupKind::MachineSet),
            (
                &entry.machine_pool,
                "machinePool",
                api::GroupKind::MachinePool,
            ),
        ];
        let mut set = named.iter().filter(|(text, _, _)| text.is_some());
        let machine_deployment = match (set.next(), set.next()) {
            (Some(_), Some((_, second, _))) => {
                return Err(NodeClassError {
                    field: field(second),
                    message: "set one of machineDeployment, machineSet and machinePool: an \
                        offering is backed by one of them"
                        .to_owned(),
                });
            }
            (Some((Some(text), name, kind)), None) => Some(group(text, name, *kind)?),
            _ => None,
        };
        if let Some(capacity_type) = &entry.capacity_type
            && !PRICED_CAPACITY_TYPES.contains(&capacity_type.as_str())
        {
            return Err(NodeClassError {
                field: field("capacityType"),
                message: format!("{capacity_type:?} is not one of on-demand, spot"),
            });
        }
        Ok(Self {
            instance_type: entry.instance_type.clone(),
            machine_deployment,
            zone: entry.zone.clone(),
            capacity_type: entry.capacity_type.clone(),
            price,
        })
    }

    /// `Some((names the MD, number of criteria))` when the row applies to `facts`.
    fn specificity(&self, facts: &OfferingFacts<'_>) -> Option<(bool, usize)> {
        let applies = |criterion: &Option<String>, value: &str| {
            criterion.as_deref().is_none_or(|c| c == value)
        };
        let md_applies = self
            .machine_deployment
            .as_ref()
            .is_none_or(|md| md == facts.machine_deployment);
        let all = md_applies
            && applies(&self.instance_type, facts.instance_type)
            && applies(&self.zone, facts.zone)
            && applies(&self.capacity_type, facts.capacity_type);
        let count = [
            self.instance_type.is_some(),
            self.machine_deployment.is_some(),
            self.zone.is_some(),
            self.capacity_type.is_some(),
        ]
        .into_iter()
        .filter(|set| *set)
        .count();
        all.then_some((self.machine_deployment.is_some(), count))
    }
}

impl PriceTable {
    /// Validates `spec.prices`.
    ///
    /// # Errors
    /// An entry with a bad price, MachineDeployment reference or capacity type.
    pub fn from_spec(spec: &ClusterAPINodeClassSpec) -> Result<Self, NodeClassError> {
        let entries = spec
            .prices
            .iter()
            .flatten()
            .enumerate()
            .map(|(index, entry)| Row::parse(index, entry))
            .collect::<Result<_, _>>()?;
        Ok(Self { entries })
    }

    /// The price of the offering `facts` describes, with the index of the entry that set it;
    /// `None` when no entry applies.
    #[must_use]
    pub fn lookup(&self, facts: &OfferingFacts<'_>) -> Option<(f64, usize)> {
        let mut best: Option<((bool, usize), usize)> = None;
        for (index, row) in self.entries.iter().enumerate() {
            if let Some(rank) = row.specificity(facts)
                && best.is_none_or(|(best_rank, _)| rank > best_rank)
            {
                best = Some((rank, index));
            }
        }
        best.and_then(|(_, index)| Some((self.entries.get(index)?.price, index)))
    }

    /// Whether the table is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}
