//! What a push's button sends back: the thing it answers, the answer, and
//! until when it stands, signed with this installation's secret (an HMAC),
//! so someone who guesses the reply topic can act on nothing.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::home::Home;

/// The first word of every answer Corral sends.
const VERSION: &str = "corral1";

/// Why an answer is not acted on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// Not an answer of Corral's (a message someone else sent the topic).
    #[error("not an answer of Corral's")]
    NotCorrals,
    /// Its signature is not this installation's.
    #[error("its signature is not this installation's (forged, or from another Corral)")]
    Forged,
    /// It is past the time it stood until.
    #[error("it expired (answers stand for a day)")]
    Expired,
}

/// An answer whose signature holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    /// The push it answers (`budget:RUN:BUDGET`).
    pub key: String,
    /// The answer (`allow`, `stop`, `test`).
    pub action: String,
}

/// This installation's secret, made once (32 random bytes, readable by the
/// user alone) in the data folder.
pub fn secret(home: &Home) -> std::io::Result<Vec<u8>> {
    let path = home.data_dir().join("push.key");
    // One cut short (a crash, a restore) is no secret: it is made anew.
    let short = match std::fs::read(&path) {
        Ok(key) if key.len() >= 32 => return Ok(key),
        Ok(_) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(e),
    };
    let mut key = vec![0u8; 32];
    std::fs::File::open("/dev/urandom").and_then(|mut f| std::io::Read::read_exact(&mut f, &mut key))?;
    crate::home::ensure_private_dir(home.data_dir()).map_err(std::io::Error::other)?;
    let tmp = path.with_extension("tmp");
    {
        use std::os::unix::fs::OpenOptionsExt;
        let mut file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
        std::io::Write::write_all(&mut file, &key)?;
    }
    // Two processes making it at once: the first one in wins (a short one
    // is replaced whole; whoever replaced it last, both read the same).
    let made = match short {
        true => std::fs::rename(&tmp, &path),
        false => std::fs::hard_link(&tmp, &path),
    };
    let _ = std::fs::remove_file(&tmp);
    if made.is_err() || short {
        let key = std::fs::read(&path)?;
        if key.len() < 32 {
            return Err(std::io::Error::other(format!("{} is too short to be a secret", path.display())));
        }
        return Ok(key);
    }
    Ok(key)
}

/// The answer `action` to push `key`, standing until `expires` (Unix
/// seconds), signed with `secret`.
pub fn sign(secret: &[u8], key: &str, action: &str, expires: i64) -> String {
    let signed = format!("{VERSION} {expires} {action} {key}");
    format!("{signed} {}", mac(secret, &signed))
}

/// Reads an answer: `Ok` if it is Corral's, signed with `secret`, and
/// stands at `now` (Unix seconds).
pub fn verify(secret: &[u8], text: &str, now: i64) -> Result<Signed, Refused> {
    let text = text.trim();
    let (signed, signature) = text.rsplit_once(' ').ok_or(Refused::NotCorrals)?;
    let mut words = signed.splitn(4, ' ');
    let (Some(VERSION), Some(expires), Some(action), Some(key)) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return Err(Refused::NotCorrals);
    };
    let expires: i64 = expires.parse().map_err(|_| Refused::NotCorrals)?;
    let mut check = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes a key of any length");
    check.update(signed.as_bytes());
    let signature = hex_decode(signature).ok_or(Refused::Forged)?;
    check.verify_slice(&signature).map_err(|_| Refused::Forged)?;
    if now > expires {
        return Err(Refused::Expired);
    }
    Ok(Signed { key: key.to_string(), action: action.to_string() })
}

fn mac(secret: &[u8], text: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes a key of any length");
    mac.update(text.as_bytes());
    mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect()
}

fn hex_decode(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_acts_only_signed_by_this_installation_and_in_time() {
        let secret = b"0123456789abcdef0123456789abcdef";
        let answer = sign(secret, "budget:r1:usd=2", "allow", 1_000);
        let signed = verify(secret, &answer, 999).unwrap();
        assert_eq!(signed, Signed { key: "budget:r1:usd=2".into(), action: "allow".into() });
        assert_eq!(verify(secret, &answer, 1_001), Err(Refused::Expired));
        assert_eq!(verify(b"another installation's secret!!!", &answer, 999), Err(Refused::Forged));
        let changed = answer.replace(" allow ", " stop ");
        assert_eq!(verify(secret, &changed, 999), Err(Refused::Forged));
        let later = answer.replace("corral1 1000", "corral1 9000");
        assert_eq!(verify(secret, &later, 999), Err(Refused::Forged));
        assert_eq!(verify(secret, "hello there", 999), Err(Refused::NotCorrals));
    }
}
