// Everything a qkv user needs: the DSL (typed and untyped), tensors, the interpreter and
// the compiler.
#pragma once

#include <qkv/dsl.hpp>
#include <qkv/runtime/interpreter.hpp>
#include <qkv/runtime/kernel.hpp>
#include <qkv/runtime/kv_cache.hpp>
#include <qkv/runtime/tensor.hpp>
#include <qkv/compiler/compile.hpp>
#include <qkv/compiler/tile_map.hpp>
