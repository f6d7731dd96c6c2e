//! A growable set of dense ids, one bit each.

#[derive(Default, Debug, Clone)]
pub struct Bits {
    words: Vec<u64>,
}

impl Bits {
    pub fn contains(&self, id: u32) -> bool {
        let (word, bit) = (id as usize / 64, id % 64);
        self.words.get(word).is_some_and(|w| w & (1 << bit) != 0)
    }

    /// Adds `id`; whether it was new.
    pub fn insert(&mut self, id: u32) -> bool {
        let (word, bit) = (id as usize / 64, id % 64);
        if word >= self.words.len() {
            self.words.resize(word + 1, 0);
        }
        let was = self.words[word] & (1 << bit) != 0;
        self.words[word] |= 1 << bit;
        !was
    }

    /// Removes `id`; whether it was there.
    pub fn remove(&mut self, id: u32) -> bool {
        let (word, bit) = (id as usize / 64, id % 64);
        match self.words.get_mut(word) {
            Some(w) if *w & (1 << bit) != 0 => {
                *w &= !(1 << bit);
                true
            }
            _ => false,
        }
    }

    #[cfg(test)]
    pub fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::Bits;

    #[test]
    fn ids_go_in_and_out_once() {
        let mut bits = Bits::default();
        assert!(!bits.contains(700));
        assert!(bits.insert(700));
        assert!(!bits.insert(700), "a second insert finds it there");
        assert!(bits.insert(3));
        assert!(bits.contains(700) && bits.contains(3) && !bits.contains(4));
        assert_eq!(bits.count(), 2);
        assert!(bits.remove(700));
        assert!(!bits.remove(700));
        assert!(!bits.remove(100_000), "an id past the end is simply absent");
        assert_eq!(bits.count(), 1);
    }
}
