// The DSL in one include: the untyped Graph and its op builders, mod expressions, and the
// typed front end (named dims checked at compile time). No MLIR.
#pragma once

#include <qkv/dsl/expr.hpp>
#include <qkv/dsl/graph.hpp>
#include <qkv/dsl/typed.hpp>
