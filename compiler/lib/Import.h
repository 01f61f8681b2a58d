// Graph -> qkv dialect (internal to the compiler library).
#pragma once

#include <memory>
#include <string>

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <qkv/dsl/graph.hpp>

namespace qkv::ir {

/// The symbol of the function a graph becomes (abi::function_name of its name).
std::string function_name(const Graph &g);

/// One func.func per graph: inputs and params (in Graph::arguments() order) are the
/// arguments, outputs the results; argument/result attributes keep the user's names and
/// dims (qkv.name, qkv.dims). Throws qkv::Error for what the compiler cannot take yet.
/// `checked`: guard every load in a mod with a qkv.check (qkv/runtime/checks.hpp numbers
/// the sites).
/// `share_layers`: each run of repeated layers (find_repeated_blocks) becomes one private
/// function, called per layer, when no site in it is checked and the caller can size its
/// results.
mlir::OwningOpRef<mlir::ModuleOp> import_graph(mlir::MLIRContext &ctx, const Graph &g,
                                               bool checked = false, bool share_layers = false);

/// A stage's text: values with a NameLoc print under that name (the fused kernels' loops:
/// b, h, kv, ...).
std::string print_module(mlir::ModuleOp m);

/// Collects the context's diagnostics (location, message, notes) into `diags` while it
/// lives, so that failures carry them instead of printing to stderr.
std::unique_ptr<mlir::ScopedDiagnosticHandler> collect_diagnostics(mlir::MLIRContext &ctx,
                                                                   std::string &diags);

} // namespace qkv::ir
