//! The stream type against a plain model (a `BTreeMap` of entries), and its node layout
//! against what Redis 7.0 writes for the same commands.

use super::*;
use rand::{RngExt, SeedableRng};

fn entry(id: StreamId, fields: &[(&str, &str)]) -> StreamEntry {
    StreamEntry {
        id,
        fields: fields
            .iter()
            .map(|(f, v)| {
                (
                    Bytes::copy_from_slice(f.as_bytes()),
                    Bytes::copy_from_slice(v.as_bytes()),
                )
            })
            .collect(),
    }
}

fn add(stream: &mut Stream, id: StreamId, fields: &[(&str, &str)]) {
    let pairs: Vec<(&[u8], &[u8])> = fields
        .iter()
        .map(|(f, v)| (f.as_bytes(), v.as_bytes()))
        .collect();
    stream.append(id, &pairs).unwrap();
}

fn all(stream: &Stream) -> Vec<StreamEntry> {
    stream.range(StreamId::MIN, StreamId::MAX, false).collect()
}

#[test]
fn a_new_stream_is_empty_at_zero() {
    let stream = Stream::new();
    assert_eq!(stream.len(), 0);
    assert_eq!(stream.last_id(), StreamId::MIN);
    assert_eq!(stream.first_id(), None);
    assert_eq!(stream.max_deleted_id(), StreamId::MIN);
    assert_eq!(stream.entries_added(), 0);
    assert!(all(&stream).is_empty());
    assert!(!stream.contains(StreamId::MIN));
}

#[test]
fn entries_read_back_in_both_directions() {
    let mut stream = Stream::new();
    add(&mut stream, StreamId::new(1, 0), &[("a", "1"), ("b", "x")]);
    add(&mut stream, StreamId::new(1, 5), &[("a", "2"), ("b", "y")]);
    add(&mut stream, StreamId::new(3, 0), &[("c", "-7"), ("d", "")]);
    add(&mut stream, StreamId::new(4, 0), &[("a", "3")]);
    assert_eq!(stream.len(), 4);
    assert_eq!(stream.first_id(), Some(StreamId::new(1, 0)));
    assert_eq!(stream.last_id(), StreamId::new(4, 0));
    assert_eq!(stream.entries_added(), 4);
    let forward = all(&stream);
    assert_eq!(
        forward[0],
        entry(StreamId::new(1, 0), &[("a", "1"), ("b", "x")])
    );
    assert_eq!(
        forward[1],
        entry(StreamId::new(1, 5), &[("a", "2"), ("b", "y")])
    );
    assert_eq!(
        forward[2],
        entry(StreamId::new(3, 0), &[("c", "-7"), ("d", "")])
    );
    assert_eq!(forward[3], entry(StreamId::new(4, 0), &[("a", "3")]));
    let backward: Vec<_> = stream.range(StreamId::MIN, StreamId::MAX, true).collect();
    assert_eq!(backward, forward.iter().rev().cloned().collect::<Vec<_>>());
    let middle: Vec<_> = stream
        .range(StreamId::new(1, 1), StreamId::new(3, 0), false)
        .map(|e| e.id)
        .collect();
    assert_eq!(middle, vec![StreamId::new(1, 5), StreamId::new(3, 0)]);
    assert_eq!(stream.get(StreamId::new(3, 0)), Some(forward[2].clone()));
    assert_eq!(stream.get(StreamId::new(3, 1)), None);
    assert!(stream.contains(StreamId::new(1, 5)));
}

/// `XADD s 1-1 a 1 b 2`, `XADD s 1-2 a 3 b 4`, `XADD s 1-3 c 5` on Redis 7.0.15 leave
/// this listpack (the node in the key's DUMP).
#[test]
fn a_node_is_laid_out_as_redis_lays_it() {
    let mut stream = Stream::new();
    add(&mut stream, StreamId::new(1, 1), &[("a", "1"), ("b", "2")]);
    add(&mut stream, StreamId::new(1, 2), &[("a", "3"), ("b", "4")]);
    add(&mut stream, StreamId::new(1, 3), &[("c", "5")]);
    let (master_id, node) = stream.nodes().next().unwrap();
    assert_eq!(master_id, StreamId::new(1, 1));
    let elements: Vec<Vec<u8>> = node.iter().map(|v| v.to_bytes()).collect();
    let expected: Vec<&str> = vec![
        "3", "0", "2", "a", "b", "0", // master: count, deleted, fields, names, end
        "2", "0", "0", "1", "2", "5", // SAMEFIELDS entry 1-1
        "2", "0", "1", "3", "4", "5", // SAMEFIELDS entry 1-2
        "0", "0", "2", "1", "c", "5", "6", // own fields entry 1-3
    ];
    let expected: Vec<Vec<u8>> = expected.iter().map(|s| s.as_bytes().to_vec()).collect();
    assert_eq!(elements, expected);
    // The listpack in Redis 7.0.15's DUMP of that key.
    let redis = "3c00000019000301000102018161028162020001020100010001010102010501020100\
                 010101030104010501000100010201010181630205010601ff";
    let redis: Vec<u8> = (0..redis.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&redis[i..i + 2], 16).unwrap())
        .collect();
    assert_eq!(node.as_bytes(), &redis[..]);
}

#[test]
fn deletion_flags_entries_and_drops_empty_nodes() {
    let mut stream = Stream::new();
    for i in 1..=5 {
        add(&mut stream, StreamId::new(i, 0), &[("f", "v")]);
    }
    assert!(stream.delete(StreamId::new(1, 0)));
    assert!(!stream.delete(StreamId::new(1, 0)));
    assert_eq!(stream.first_id(), Some(StreamId::new(2, 0)));
    assert!(stream.delete(StreamId::new(3, 0)));
    assert_eq!(stream.max_deleted_id(), StreamId::new(3, 0));
    assert!(stream.delete(StreamId::new(2, 0)));
    assert_eq!(stream.max_deleted_id(), StreamId::new(3, 0));
    assert_eq!(stream.len(), 2);
    let (_, node) = stream.nodes().next().unwrap();
    let head: Vec<i64> = node.iter().take(2).map(|v| v.as_i64().unwrap()).collect();
    assert_eq!(head, vec![2, 3], "live and deleted counts");
    assert!(stream.delete(StreamId::new(4, 0)));
    assert!(stream.delete(StreamId::new(5, 0)));
    assert_eq!(stream.node_count(), 0);
    assert_eq!(stream.first_id(), None);
    assert_eq!(stream.recorded_first_id(), StreamId::MIN);
    assert_eq!(stream.last_id(), StreamId::new(5, 0));
    assert_eq!(stream.entries_added(), 5);
}

#[test]
fn ids_are_resolved_as_xadd_resolves_them() {
    let mut stream = Stream::new();
    let not_greater = Err(AppendError::IdNotGreater);
    assert_eq!(stream.resolve_id(NewId::Auto, 7), Ok(StreamId::new(7, 0)));
    assert_eq!(
        stream.resolve_id(NewId::Exact(StreamId::MIN), 7),
        not_greater
    );
    add(&mut stream, StreamId::new(7, 3), &[("f", "v")]);
    assert_eq!(stream.resolve_id(NewId::Auto, 5), Ok(StreamId::new(7, 4)));
    assert_eq!(
        stream.resolve_id(NewId::AutoSeq(7), 0),
        Ok(StreamId::new(7, 4))
    );
    assert_eq!(
        stream.resolve_id(NewId::AutoSeq(8), 0),
        Ok(StreamId::new(8, 0))
    );
    assert_eq!(stream.resolve_id(NewId::AutoSeq(6), 0), not_greater);
    assert_eq!(
        stream.resolve_id(NewId::Exact(StreamId::new(7, 3)), 0),
        not_greater
    );
    stream.set_last_id(StreamId::new(9, u64::MAX));
    assert_eq!(
        stream.resolve_id(NewId::AutoSeq(9), 0),
        Err(AppendError::SequenceExhausted)
    );
    assert_eq!(stream.resolve_id(NewId::Auto, 0), Ok(StreamId::new(10, 0)));
    assert_eq!(
        stream.append(StreamId::new(9, 0), &[(b"f", b"v")]),
        Err(AppendError::IdNotGreater)
    );
}

/// Random appends, deletions and trims against a model; node limits are small so that
/// entries spread over many nodes.
#[test]
fn random_operations_agree_with_a_model() {
    for seed in 0..40u64 {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut stream = Stream::new();
        let mut model: BTreeMap<StreamId, Vec<(Bytes, Bytes)>> = BTreeMap::new();
        let mut last = StreamId::MIN;
        for _ in 0..400 {
            match rng.random_range(0..10) {
                0..=5 => {
                    let id = StreamId::new(
                        last.ms + rng.random_range(0..3u64),
                        rng.random_range(0..4u64),
                    );
                    let names = ["a", "b", "c", "12", "-3"];
                    let count = rng.random_range(1..4);
                    let fields: Vec<(String, String)> = (0..count)
                        .map(|i| {
                            let name = if rng.random_range(0..3) == 0 {
                                names[rng.random_range(0..names.len())]
                            } else {
                                names[i]
                            };
                            (
                                name.to_string(),
                                rng.random_range(0..100_000i64).to_string(),
                            )
                        })
                        .collect();
                    let pairs: Vec<(&[u8], &[u8])> = fields
                        .iter()
                        .map(|(f, v)| (f.as_bytes(), v.as_bytes()))
                        .collect();
                    let result = stream.append(id, &pairs);
                    if id > last {
                        result.unwrap();
                        last = id;
                        model.insert(
                            id,
                            fields
                                .iter()
                                .map(|(f, v)| (Bytes::from(f.clone()), Bytes::from(v.clone())))
                                .collect(),
                        );
                    } else {
                        assert_eq!(result, Err(AppendError::IdNotGreater));
                    }
                }
                6 | 7 => {
                    let id = StreamId::new(rng.random_range(0..=last.ms), rng.random_range(0..4));
                    assert_eq!(stream.delete(id), model.remove(&id).is_some());
                }
                8 => {
                    let max = rng.random_range(0..=model.len() as u64 + 2);
                    let approx = rng.random_range(0..2) == 0;
                    let trim = Trim {
                        strategy: TrimStrategy::MaxLen(max),
                        approx,
                        limit: 0,
                    };
                    let removed = stream.trim(&trim);
                    for _ in 0..removed {
                        model.pop_first();
                    }
                    if !approx {
                        assert!(model.len() as u64 <= max);
                    }
                }
                _ => {
                    let min = StreamId::new(rng.random_range(0..=last.ms), rng.random_range(0..4));
                    let approx = rng.random_range(0..2) == 0;
                    let trim = Trim {
                        strategy: TrimStrategy::MinId(min),
                        approx,
                        limit: 0,
                    };
                    let removed = stream.trim(&trim);
                    for _ in 0..removed {
                        let (first, _) = model.pop_first().unwrap();
                        assert!(first < min);
                    }
                    if !approx {
                        assert!(model.keys().next().is_none_or(|first| *first >= min));
                    }
                }
            }
            assert_eq!(stream.len(), model.len() as u64, "seed {seed}");
            assert_eq!(
                stream.first_id(),
                model.keys().next().copied(),
                "seed {seed}"
            );
        }
        let entries: Vec<_> = model
            .iter()
            .map(|(id, fields)| StreamEntry {
                id: *id,
                fields: fields.clone(),
            })
            .collect();
        assert_eq!(all(&stream), entries, "seed {seed}");
        let mut backward: Vec<_> = stream.range(StreamId::MIN, StreamId::MAX, true).collect();
        backward.reverse();
        assert_eq!(backward, entries, "seed {seed}");
        for probe in 0..50 {
            let start = StreamId::new(probe % (last.ms + 1), probe % 4);
            let end = StreamId::new(start.ms + 1, 2);
            let expected: Vec<_> = model.range(start..=end).map(|(id, _)| *id).collect();
            let got: Vec<_> = stream.range(start, end, false).map(|e| e.id).collect();
            assert_eq!(got, expected, "seed {seed}");
            let mut got: Vec<_> = stream.range(start, end, true).map(|e| e.id).collect();
            got.reverse();
            assert_eq!(got, expected, "seed {seed}");
        }
    }
}
