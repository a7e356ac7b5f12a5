#pragma once

// The workload key: a structural hash that identifies a workload in the tuning log, stable
// across machines, processes and versions of the code.
//
// CanonicalText renders the workload in the text format (parser.h) with every name that does not
// matter replaced by a positional one and every spelling choice fixed:
//   - tensors are named t0, t1, ... in definition order; the workload's family name, its spec and
//     the tensors' own names are left out;
//   - a tensor's spatial axes are named a0, a1, ... and its reduction axes r0, r1, ..., each with
//     its extent written out (`t2[a0: 1024, a1: 1024] = sum(r0: 512) ...`);
//   - inputs are written `tK = input(DTYPE, [D0, D1])` with concrete dimensions;
//   - expressions are printed with single spaces around binary operators and the fewest
//     parentheses that keep the tree; float immediates in the shortest form that reads back to the
//     same double, written DTYPE(value) when their type is not f32; integer immediates of a type
//     other than i64 as DTYPE(value);
//   - one statement per line, each ending in '\n', the last being `output tI, tJ`, the outputs in
//     the workload's order.
// The canonical text of a valid workload is itself a valid definition with the same canonical
// text. Two workloads that differ only in whitespace, comments, names, `with` parameters versus
// literal sizes, or inferred versus written extents have the same canonical text.
//
// WorkloadKey is the 64-bit FNV-1a hash of the canonical text's bytes (offset basis
// 0xcbf29ce484222325, prime 0x100000001b3: for each byte, hash ^= byte; hash *= prime, modulo
// 2^64; Fnv1a64 in schedules/util/fnv1a.h), printed as 16 lowercase hexadecimal digits. Nothing
// depends on pointers or std::hash.
//
// All functions are pure and thread-safe.

#include <cstdint>
#include <string>

#include "schedules/workload/workload.h"

namespace tessel::schedules {

std::string CanonicalText(const Workload& w);

// 16 lowercase hex digits, e.g. "3f2a9c0d11e45b70".
std::string WorkloadKey(const Workload& w);

}  // namespace tessel::schedules
