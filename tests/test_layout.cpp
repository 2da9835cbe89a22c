// Mesh and layout arithmetic, DTensor-compatible string forms, and every rejection.
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>

#include "core/error.hpp"
#include "core/layout.hpp"

using namespace dtrain;

TEST_CASE("mesh coordinates are row-major, last dim fastest") {
  Mesh mesh({"batch", "model"}, {4, 2});
  CHECK(mesh.size() == 8);
  CHECK(mesh.coords(5) == std::vector<int>{2, 1});
  CHECK(mesh.rank_of({3, 0}) == 6);
  for (int r = 0; r < 8; ++r) CHECK(mesh.rank_of(mesh.coords(r)) == r);
  CHECK(mesh.group(5, {"batch"}) == std::vector<int>{1, 3, 5, 7});
  CHECK(mesh.group(5, {"model"}) == std::vector<int>{4, 5});
  CHECK(mesh.group(5, {"batch", "model"}).size() == 8);
  CHECK(mesh.group(5, {}) == std::vector<int>{5});
}

TEST_CASE("mesh string round trip") {
  Mesh mesh({"batch", "model"}, {2, 2});
  CHECK(mesh.to_string() == "|batch=2,model=2|0,1,2,3|0,1,2,3|CPU:0,CPU:1,CPU:2,CPU:3");
  CHECK(Mesh::from_string(mesh.to_string()) == mesh);
  CHECK(Mesh::from_string("|x=2|0,1|0,1|GPU:0,GPU:1").devices()[1] == "GPU:1");
}

TEST_CASE("meshes are interned: equal meshes are one pointer, different ones are not") {
  MeshPtr a = make_mesh({"batch", "model"}, {4, 2});
  CHECK(make_mesh({"batch", "model"}, {4, 2}) == a);
  CHECK(intern(Mesh::from_string(a->to_string())) == a);
  CHECK(make_mesh({"batch", "model"}, {2, 4}) != a);
  CHECK(make_mesh({"model", "batch"}, {4, 2}) != a);
  CHECK(make_mesh({"batch", "model"}, {4, 2}, {"GPU:0", "GPU:1", "GPU:2", "GPU:3", "GPU:4", "GPU:5", "GPU:6", "GPU:7"}) != a);
  // A layout read back from its string names the same mesh, so it compares equal without a value check.
  Layout layout({"batch", kUnsharded}, a);
  CHECK(Layout::from_string(layout.to_string()).mesh_ptr() == a);
}

TEST_CASE("mesh errors") {
  CHECK_THROWS_AS(Mesh({"a", "a"}, {2, 2}), UsageError);
  CHECK_THROWS_AS(Mesh({"unsharded"}, {2}), UsageError);
  CHECK_THROWS_AS(Mesh({"a"}, {0}), UsageError);
  CHECK_THROWS_AS(Mesh({"a"}, {2}, {"CPU:0"}), UsageError);
  CHECK_THROWS_AS(Mesh::from_string("batch=2"), UsageError);
  CHECK_THROWS_AS(Mesh::from_string("|batch=x|0|0|CPU:0"), UsageError);
  CHECK_THROWS_WITH_AS(Mesh({"a"}, {2}).dim_index("b"), "[mesh] unknown mesh dim 'b' (the mesh has: a)", UsageError);
}

TEST_CASE("layout shapes, offsets and helpers") {
  auto mesh = make_mesh({"batch", "model"}, {4, 2});
  Layout layout({"batch", "model"}, mesh);
  CHECK(layout.local_shape({8, 6}) == Shape{2, 3});
  CHECK(layout.local_offset({8, 6}, 5) == Shape{4, 3});  // coords (2, 1)
  CHECK(Layout::replicated(mesh, 2).fully_replicated());
  CHECK(Layout::replicated(mesh, 3) == Layout({kUnsharded, kUnsharded, kUnsharded}, mesh));
  CHECK(Layout::replicated(mesh, 0).rank() == 0);
  CHECK_THROWS_WITH_AS(Layout::replicated(mesh, 9), "[layout] [unsharded, unsharded, unsharded, unsharded, unsharded, "
                       "unsharded, unsharded, unsharded, unsharded] has more than 8 axes", UsageError);
  CHECK(Layout::batch_sharded(mesh, "batch", 3, 1).specs() == std::vector<std::string>{kUnsharded, "batch", kUnsharded});
  CHECK(layout.erase({0}).specs() == std::vector<std::string>{"model"});
  CHECK(layout.erase({1}) == Layout({"batch"}, mesh));
  CHECK(layout.erase({0, 1}).rank() == 0);
  CHECK(layout.erase({}) == layout);
  CHECK_THROWS_WITH(layout.erase({2}), "[layout] erase: axis 2 out of range");
  CHECK(layout.axis_of("model") == 1);
  CHECK(layout.axis_of("other") == -1);
  CHECK(layout.axis_of_dim(0) == 0);
  CHECK(layout.erase({0}).axis_of_dim(0) == -1);
}

TEST_CASE("a layout from mesh dim indices equals the one from names, and is checked alike") {
  auto mesh = make_mesh({"batch", "model"}, {4, 2});
  CHECK(Layout::of_dims({1, -1, 0}, mesh) == Layout({"model", kUnsharded, "batch"}, mesh));
  CHECK(Layout::of_dims({}, mesh) == Layout::replicated(mesh, 0));
  CHECK(Layout::of_dims({-1, 0}, mesh).dim_at(1) == 0);
  CHECK_THROWS_AS(Layout::of_dims({2}, mesh), Error);
  CHECK_THROWS_AS(Layout::of_dims({-2}, mesh), Error);
  CHECK_THROWS_AS(Layout::of_dims({0, 0}, mesh), Error);
}

TEST_CASE("with_spec unshards directly and checks a named dim like the constructor") {
  auto mesh = make_mesh({"batch", "model"}, {4, 2});
  Layout layout({"batch", "model"}, mesh);
  CHECK(layout.with_spec(1, kUnsharded) == Layout({"batch", kUnsharded}, mesh));
  CHECK(layout.with_spec(0, kUnsharded).with_spec(1, "batch") == Layout({kUnsharded, "batch"}, mesh));
  CHECK(Layout::replicated(mesh, 2).with_spec(1, "model") == Layout({kUnsharded, "model"}, mesh));
  CHECK_THROWS_WITH_AS(layout.with_spec(0, "model"), "[layout] [model, model] uses mesh dim 'model' twice", UsageError);
  CHECK_THROWS_WITH_AS(layout.with_spec(0, "x"),
                       "[layout] [x, model] names unknown mesh dim 'x' (the mesh has: batch, model)", UsageError);
  CHECK_THROWS(layout.with_spec(2, kUnsharded));
}

TEST_CASE("inline vector: inline storage, checked capacity, released slots") {
  Axes axes{3, 1};
  axes.push_back(2);
  CHECK(axes.size() == 3);
  CHECK(std::vector<int>(axes.begin(), axes.end()) == std::vector<int>{3, 1, 2});
  CHECK(Axes(std::vector<int>{3, 1, 2}) == axes);
  CHECK(Axes{3, 1} != axes);
  std::sort(axes.begin(), axes.end());
  CHECK(axes.back() == 3);
  axes.resize(1);
  CHECK(axes == Axes{1});
  CHECK(Axes().empty());

  InlineVector<int, 2> full{1, 2};
  CHECK_THROWS_WITH(full.push_back(3), "[inline_vector] more than 2 elements");
  CHECK_THROWS_WITH(full.resize(3), "[inline_vector] more than 2 elements");
  CHECK_THROWS_WITH((InlineVector<int, 2>{1, 2, 3}), "[inline_vector] more than 2 elements");

  // A shrink resets the dropped slots, so shared values are released at once.
  auto shared = std::make_shared<int>(7);
  InlineVector<std::shared_ptr<int>, 2> holders{shared, shared};
  CHECK(shared.use_count() == 3);
  holders.resize(1);
  CHECK(shared.use_count() == 2);
  holders.clear();
  CHECK(shared.use_count() == 1);
}

TEST_CASE("layout string round trip matches DTensor's form") {
  auto mesh = make_mesh({"batch"}, {2});
  Layout layout({"batch", kUnsharded}, mesh);
  CHECK(layout.to_string() == "sharding_specs:batch,unsharded, mesh:|batch=2|0,1|0,1|CPU:0,CPU:1");
  CHECK(Layout::from_string(layout.to_string()) == layout);
  CHECK(Layout::from_string("sharding_specs:, mesh:|batch=2|0,1|0,1|CPU:0,CPU:1").rank() == 0);
}

TEST_CASE("layout errors name what is wrong") {
  auto mesh = make_mesh({"batch", "model"}, {4, 2});
  CHECK_THROWS_WITH_AS(Layout({"batch", "feature"}, mesh),
                       "[layout] [batch, feature] names unknown mesh dim 'feature' (the mesh has: batch, model)",
                       UsageError);
  CHECK_THROWS_WITH_AS(Layout({"batch", "batch"}, mesh), "[layout] [batch, batch] uses mesh dim 'batch' twice",
                       UsageError);
  Layout layout({"batch", "model"}, mesh);
  CHECK_THROWS_WITH_AS(layout.local_shape({8, 6, 1}),
                       "[layout] [batch, model] has rank 2 but the tensor (8,6,1) has rank 3", UsageError);
  CHECK_THROWS_WITH_AS(layout.local_shape({6, 6}),
                       "[layout] axis 0 of (6,6) has extent 6, not divisible by mesh dim 'batch' of size 4",
                       UsageError);
  CHECK_THROWS_AS(Layout::from_string("sharding_specs:batch"), UsageError);
  CHECK_THROWS_AS(Layout::from_string("sharding_specs:batch,, mesh:|batch=2|0,1|0,1|CPU:0,CPU:1"), UsageError);
}
