// Embedding: ids [...] (row numbers stored as floats, as labels are) -> table rows [..., dim].
//
// SPMD rule. The table [vocabulary, dim] may be sharded over its rows and/or its columns; the ids over any
// dims the table does not use (a dim the table shards is dropped from the ids, gathering them: those ranks
// hold other rows or columns of the same lookups). Each rank looks up the ids its rows hold and writes zeros
// for the rest, so with the rows sharded on dim r the output is partial over r: one all_reduce when it is
// used. The output [..., dim] keeps the ids' sharding and the table's column sharding.
// The table's gradient is a scatter-add of the output gradient's rows into the rows looked up, on each rank
// for its own rows and columns; partial over the dims that shard the ids (each rank saw only its ids).
#pragma once
#include "core/autograd.hpp"
#include "core/dtensor.hpp"

namespace dtrain::ops {

// The ids' layout the lookup runs in: theirs, less the dims that shard the table.
Layout embedding_ids_layout(const Layout& ids, const Layout& table);

// ids [...] (any layout; an id that is no row of the table is an error naming it), table [vocabulary, dim].
DTensor embedding(const DTensor& ids, const DTensor& table);
// The table's gradient from the output's gradient `grad`; `ids` in embedding_ids_layout.
DTensor embedding_table_grad(const DTensor& grad, const DTensor& ids, const DTensor& table);

}  // namespace dtrain::ops

namespace dtrain {

// The ids are not differentiated.
Var embedding(const DTensor& ids, const Var& table);

}  // namespace dtrain
