#pragma once

// Structural equality and hashing of IR trees, up to a consistent renaming of variables.
//
// Equality. Two trees are equal when they have the same shape and the same node contents (kinds,
// dtypes, operators, constants, call names, loop kinds, thread tags, annotations, ...), and their
// variables correspond one to one: variables are paired in traversal order (the first variable
// met in `a` is paired with the first one met in `b`, and so on; a For or LetStmt pairs its
// variable before visiting its bounds and body), and a variable of `a` must always meet the same
// variable of `b` (a bijection). Variable names are ignored; their dtypes are compared. Buffers
// are compared by value: name, dtype, shape, scope and explicit strides (not by pointer).
// Float constants are compared by bit pattern (0.0 and -0.0 differ, NaNs with the same bits are
// equal), so that equality and hashing agree.
//
// Hashing. StructuralHash is 64-bit FNV-1a (offset basis 0xcbf29ce484222325, prime
// 0x100000001b3) over a byte stream written by a pre-order traversal, the same traversal that
// equality follows:
//   - every node writes a tag string: "e:" or "s:" and its kind name ("Binary", "For", ...),
//     then its fields;
//   - enums are written by their printed names (DTypeName, BinaryOpName, "neg"/"not",
//     ForKindName, ThreadTagName, MemScopeName, ReduceOpName), never by ordinal, so reordering
//     an enum does not change hashes;
//   - integers are written as 8 bytes, little endian; doubles as the 8 bytes of their IEEE-754
//     bit pattern; strings as their length then their bytes; lists as their length then their
//     elements; a null statement as the tag "s:null";
//   - a variable is written as its dtype and its position: the number of distinct variables met
//     before its first occurrence (de Bruijn-like numbering by first occurrence);
//   - a buffer is written as its name, dtype, shape, scope and strides.
// Nothing depends on pointer values, std::hash or the platform, so hashes are stable across runs
// and machines; they change only when the node set or the fields above change.
// Equal trees have equal hashes.
//
// Threads: pure functions, callable from any thread.

#include <cstdint>

#include "schedules/ir/expr.h"
#include "schedules/ir/stmt.h"

namespace tessel::schedules {

bool StructuralEqual(const Expr& a, const Expr& b);
bool StructuralEqual(const Stmt& a, const Stmt& b);

// Syntactic identity: the same tree over the same variables and buffers (by pointer), constants
// by bit pattern as above. Stricter than StructuralEqual (no renaming, no buffer comparison by
// value); the simplifier uses it to spot repeated terms.
bool Identical(const Expr& a, const Expr& b);

uint64_t StructuralHash(const Expr& e);
uint64_t StructuralHash(const Stmt& s);

}  // namespace tessel::schedules
