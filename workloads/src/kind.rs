//! Which of fencer's own lock clients a worker uses: the reference client, or one with a bug
//! people ship put back in.

use serde::{Deserialize, Serialize};

use crate::UnknownName;

/// fencer's own lock client: the reference ([`crate::ReferenceLibrary`] driven by the
/// reference worker), or a client mutant with one real-world bug put back in, in the library
/// or in how its caller uses it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClientVariant {
    /// Renews while the lease is held and tells its worker when the lease is lost; its
    /// ownership check asks the lock service; its caller stops protected work once the check
    /// or a notice says the lease is gone, stops the renewal before releasing, and never
    /// resends a write.
    #[default]
    Reference,
    /// The caller keeps writing after its library said the lease was lost or could not be
    /// confirmed (the renew-failure policy forced to `continue`): the code that logs "could
    /// not extend lock" and carries on.
    IgnoreRenewFailure,
    /// The watchdog is not stopped by release and keeps renewing with the released owner token
    /// until the service refuses it (a watchdog timer nobody cancels on unlock).
    ZombieRenewal,
    /// A write that was rejected or timed out is sent again, once, with the same write id,
    /// value and (stale) fencing token: the generic retry wrapper that makes a rejected write
    /// a duplicate.
    BlindRetry,
    /// The watchdog renews on its timer whatever the work is doing, until release: when the
    /// caller gives the work up without releasing (cancelled, stuck), the lease is kept alive
    /// for nobody (a renewal loop started from a context that outlives its caller).
    EternalWatchdog,
    /// The ownership check answers from a flag the library set when the lease was granted
    /// and clears only when a renewal is refused, never asking the service (`isAcquired`):
    /// a lease that expired during a pause still reads as held.
    CachedCheck,
    /// The watchdog swallows renewal failures (logs them and carries on) and never tells its
    /// worker that the lease is lost.
    SilentWatchdog,
    /// The watchdog renews every 0.6 TTLs whatever the settings say: one lost renewal reply
    /// and the next renewal comes after the lease's confirmed validity ended.
    SparseRenewal,
}

impl ClientVariant {
    /// Every variant, reference first.
    pub const ALL: [ClientVariant; 8] = [
        ClientVariant::Reference,
        ClientVariant::IgnoreRenewFailure,
        ClientVariant::ZombieRenewal,
        ClientVariant::BlindRetry,
        ClientVariant::EternalWatchdog,
        ClientVariant::CachedCheck,
        ClientVariant::SilentWatchdog,
        ClientVariant::SparseRenewal,
    ];

    /// The CLI name.
    pub fn name(self) -> &'static str {
        match self {
            ClientVariant::Reference => "reference",
            ClientVariant::IgnoreRenewFailure => "ignore-renew-failure",
            ClientVariant::ZombieRenewal => "zombie-renewal",
            ClientVariant::BlindRetry => "blind-retry",
            ClientVariant::EternalWatchdog => "eternal-watchdog",
            ClientVariant::CachedCheck => "cached-check",
            ClientVariant::SilentWatchdog => "silent-watchdog",
            ClientVariant::SparseRenewal => "sparse-renewal",
        }
    }

    /// The variant named `name`, if fencer has one.
    pub fn named(name: &str) -> Option<ClientVariant> {
        ClientVariant::ALL
            .into_iter()
            .find(|variant| variant.name() == name)
    }

    /// Every name, for "expected one of" messages (a test holds it to [`ClientVariant::ALL`]).
    pub const EXPECTED: &'static str = "one of reference, ignore-renew-failure, zombie-renewal, \
         blind-retry, eternal-watchdog, cached-check, silent-watchdog, sparse-renewal";
}

impl std::str::FromStr for ClientVariant {
    type Err = UnknownName;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        ClientVariant::named(text).ok_or_else(|| UnknownName {
            setting: "client",
            found: text.to_string(),
            expected: ClientVariant::EXPECTED,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_names_parse_back_and_unknown_names_list_the_choices() {
        for variant in ClientVariant::ALL {
            assert_eq!(variant.name().parse::<ClientVariant>(), Ok(variant));
            assert_eq!(
                serde_json::to_value(variant).unwrap(),
                serde_json::Value::String(variant.name().into())
            );
        }
        let error = "retry".parse::<ClientVariant>().unwrap_err().to_string();
        let every = ClientVariant::ALL.map(ClientVariant::name).join(", ");
        assert_eq!(
            error,
            format!("unknown client `retry`: expected one of {every}")
        );
    }
}
