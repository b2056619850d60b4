//! Exactly-once payment ids without an account per payment.
//!
//! Each payer has a sliding window of the most recent `WINDOW_BITS` ids (the IPsec anti-replay
//! scheme). An id is accepted at most once: ids inside the window are checked against their bit,
//! ids newer than the window slide it forward, ids older than the window are refused. The gateway
//! allocates ids in increasing order per agent, so up to `WINDOW_BITS` payments of one agent may be
//! in flight and land in any order.

pub const WINDOW_WORDS: usize = 16;
pub const WINDOW_BITS: u64 = (WINDOW_WORDS as u64) * 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    /// Id 0 is reserved so a fresh window (highest = 0) means "nothing recorded".
    Zero,
    Duplicate,
    TooOld,
}

/// `bits` bit `i` (word `i / 64`, bit `i % 64`) is set when id `highest - i` was accepted.
pub fn accept(highest: &mut u64, bits: &mut [u64; WINDOW_WORDS], id: u64) -> Result<(), Rejection> {
    if id == 0 {
        return Err(Rejection::Zero);
    }
    if id > *highest {
        shift_up(bits, id - *highest);
        *highest = id;
        bits[0] |= 1;
        return Ok(());
    }
    let offset = *highest - id;
    if offset >= WINDOW_BITS {
        return Err(Rejection::TooOld);
    }
    let (word, mask) = ((offset / 64) as usize, 1u64 << (offset % 64));
    if bits[word] & mask != 0 {
        return Err(Rejection::Duplicate);
    }
    bits[word] |= mask;
    Ok(())
}

/// Moves every bit `i` to `i + by`, dropping bits that leave the window.
fn shift_up(bits: &mut [u64; WINDOW_WORDS], by: u64) {
    if by >= WINDOW_BITS {
        *bits = [0; WINDOW_WORDS];
        return;
    }
    let words = (by / 64) as usize;
    let rest = (by % 64) as u32;
    for i in (0..WINDOW_WORDS).rev() {
        let low = if i >= words { bits[i - words] } else { 0 };
        let carry = if rest > 0 && i > words { bits[i - words - 1] >> (64 - rest) } else { 0 };
        bits[i] = if rest > 0 { (low << rest) | carry } else { low };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// The reference model: accept any id not seen before whose distance below the highest
    /// accepted id is within the window.
    struct Model {
        seen: HashSet<u64>,
        highest: u64,
    }

    impl Model {
        fn accept(&mut self, id: u64) -> Result<(), Rejection> {
            if id == 0 {
                return Err(Rejection::Zero);
            }
            if id <= self.highest && self.highest - id >= WINDOW_BITS {
                return Err(Rejection::TooOld);
            }
            if !self.seen.insert(id) {
                return Err(Rejection::Duplicate);
            }
            self.highest = self.highest.max(id);
            Ok(())
        }
    }

    /// xorshift64*: deterministic pseudo-random ids without a dependency.
    fn next(state: &mut u64) -> u64 {
        *state ^= *state >> 12;
        *state ^= *state << 25;
        *state ^= *state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    #[test]
    fn a_fresh_window_accepts_an_id_once() {
        let (mut highest, mut bits) = (0, [0; WINDOW_WORDS]);
        assert_eq!(accept(&mut highest, &mut bits, 7), Ok(()));
        assert_eq!(accept(&mut highest, &mut bits, 7), Err(Rejection::Duplicate));
        assert_eq!(accept(&mut highest, &mut bits, 0), Err(Rejection::Zero));
    }

    #[test]
    fn ids_landing_out_of_order_inside_the_window_are_all_accepted() {
        let (mut highest, mut bits) = (0, [0; WINDOW_WORDS]);
        for id in (1..=WINDOW_BITS).rev() {
            assert_eq!(accept(&mut highest, &mut bits, id), Ok(()), "id {id}");
        }
        for id in 1..=WINDOW_BITS {
            assert_eq!(accept(&mut highest, &mut bits, id), Err(Rejection::Duplicate));
        }
    }

    #[test]
    fn an_id_exactly_one_window_below_the_highest_is_too_old() {
        let (mut highest, mut bits) = (0, [0; WINDOW_WORDS]);
        accept(&mut highest, &mut bits, WINDOW_BITS + 1).unwrap();
        assert_eq!(accept(&mut highest, &mut bits, 1), Err(Rejection::TooOld));
        assert_eq!(accept(&mut highest, &mut bits, 2), Ok(()));
    }

    #[test]
    fn the_window_agrees_with_the_reference_model_on_random_traffic() {
        let mut state = 0x9e37_79b9_7f4a_7c15;
        for round in 0..200 {
            let (mut highest, mut bits) = (0, [0; WINDOW_WORDS]);
            let mut model = Model { seen: HashSet::new(), highest: 0 };
            let spread = [3, 70, 700, 3_000][round % 4];
            let mut base = 1u64;
            for _ in 0..2_000 {
                let r = next(&mut state);
                // Mostly increasing ids with jitter, some replays of old ids, some big jumps.
                let id = match r % 10 {
                    0 => base.saturating_sub(next(&mut state) % (WINDOW_BITS * 2)),
                    1 => base + next(&mut state) % (WINDOW_BITS * 3),
                    _ => base + next(&mut state) % spread,
                };
                base = base.max(id);
                assert_eq!(accept(&mut highest, &mut bits, id), model.accept(id), "id {id}");
            }
        }
    }
}
