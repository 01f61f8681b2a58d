// Everything a qkv user needs: the DSL (typed and untyped), tensors and their files
// (.npy, .safetensors), the interpreter, the check against it, and the compiler.
#pragma once

#include <qkv/dsl.hpp>
#include <qkv/runtime/bundle.hpp>
#include <qkv/runtime/check_reference.hpp>
#include <qkv/runtime/graph_json.hpp>
#include <qkv/runtime/interpreter.hpp>
#include <qkv/runtime/kernel.hpp>
#include <qkv/runtime/kv_cache.hpp>
#include <qkv/runtime/safetensors.hpp>
#include <qkv/runtime/tensor.hpp>
#include <qkv/compiler/compile.hpp>
#include <qkv/compiler/export.hpp>
#include <qkv/compiler/tile_map.hpp>
