// pack/unpack round trips and redistribute between every pair of layouts, with partial sources.
#include <doctest/doctest.h>

#include "tests/spmd_harness.hpp"

using namespace dtrain;
using namespace dtrain::testing;

TEST_CASE("pack then unpack gives the global tensor back for every layout") {
  Tensor global = test_tensor({8, 4, 2}, 1);
  for (const MeshPtr& mesh : test_meshes()) {
    for (const Layout& layout : all_layouts(mesh, global.shape())) {
      std::vector<Tensor> shards;
      for (int r = 0; r < mesh->size(); ++r) shards.push_back(pack(global, layout, r));
      CHECK(unpack(global.shape(), layout, shards).to_vector() == global.to_vector());
    }
  }
}

TEST_CASE("redistribute between every pair of layouts keeps the value") {
  Tensor global = test_tensor({8, 8}, 2);
  for (const MeshPtr& mesh : {make_mesh({"x"}, {8}), make_mesh({"x", "y"}, {4, 2}), make_mesh({"x", "y", "z"}, {2, 2, 2})}) {
    auto layouts = all_layouts(mesh, global.shape());
    for (const Layout& source : layouts) {
      for (const Layout& target : layouts) {
        std::vector<Tensor> shards(mesh->size());
        run_spmd(mesh, [&](DeviceContext& device) {
          DTensor x(global.shape(), source, pack(global, source, device.rank));
          shards[device.rank] = redistribute(x, target).local();
        });
        INFO(source.specs_string() << " -> " << target.specs_string() << " on " << mesh->to_string());
        CHECK(unpack(global.shape(), target, shards).to_vector() == global.to_vector());
      }
    }
  }
}

TEST_CASE("a partial value sums to the global value in any target layout") {
  // Each rank holds global * (coordinate along z + 1) / 3 over z of size 2: the sum is the global tensor.
  Tensor global = test_tensor({8, 8}, 3);
  MeshPtr mesh = make_mesh({"x", "y", "z"}, {2, 2, 2});
  for (const Layout& source : all_layouts(mesh, global.shape())) {
    if (source.axis_of("z") >= 0) continue;  // z is the partial dim
    for (const Layout& target : all_layouts(mesh, global.shape())) {
      std::vector<Tensor> shards(mesh->size());
      run_spmd(mesh, [&](DeviceContext& device) {
        Tensor local = pack(global, source, device.rank);
        const float share = float(mesh->coord(device.rank, "z") + 1) / 3.0f;
        for (int64_t i = 0; i < local.size(); ++i) local[i] *= share;
        shards[device.rank] = redistribute(DTensor(global.shape(), source, local, {"z"}), target).local();
      });
      std::string why;
      INFO(source.specs_string() << " partial{z} -> " << target.specs_string());
      CHECK(close(unpack(global.shape(), target, shards), global, 1e-6f, &why));
    }
  }
}

TEST_CASE("partial dims are kept in mesh order and checked") {
  MeshPtr mesh = make_mesh({"x", "y", "z"}, {2, 2, 2});
  Layout layout({"x", kUnsharded}, mesh);
  Tensor local(layout.local_shape({4, 4}));
  CHECK(DTensor({4, 4}, layout, local, {"z", "y"}).partial_names() == std::vector<std::string>{"y", "z"});
  CHECK(DTensor({4, 4}, layout, local, {"z", "y"}).describe() == "(4,4) [x, unsharded] partial{y,z}");
  CHECK_FALSE(DTensor({4, 4}, layout, local).is_partial());
  CHECK_THROWS_WITH(DTensor({4, 4}, layout, local, {"z", "x"}),
                    "[dtensor] mesh dim 'x' cannot both shard and be partial");
  CHECK_THROWS_WITH(DTensor({4, 4}, layout, local, {"y", "y"}), "[dtensor] partial dims y,y are not all mesh dims");
  CHECK_THROWS_WITH(DTensor({4, 4}, layout, local, {"y", "w"}), "[dtensor] partial dims y,w are not all mesh dims");
}

TEST_CASE("PartialDims is a set of mesh dim indices, iterated in mesh order") {
  MeshPtr mesh = make_mesh({"x", "y", "z"}, {2, 2, 2});
  const PartialDims zy = PartialDims::named(*mesh, {"z", "y"});
  CHECK(zy == PartialDims::named(*mesh, {"y", "z"}));
  CHECK(zy.size() == 2);
  CHECK_FALSE(zy.empty());
  CHECK(std::vector<int>(zy.begin(), zy.end()) == std::vector<int>{1, 2});
  CHECK(zy.names(*mesh) == std::vector<std::string>{"y", "z"});
  CHECK(PartialDims().empty());
  CHECK(PartialDims().names(*mesh).empty());

  PartialDims built;
  built.add(2);
  CHECK(built.contains(2));
  CHECK_FALSE(built.contains(1));
  CHECK(built != zy);
  built.add(1);
  built.add(1);  // a set: adding again changes nothing
  CHECK(built == zy);
  CHECK_THROWS_AS(built.add(32), Error);
  CHECK_THROWS_AS(built.add(-1), Error);

  // Some total order, the same on every rank.
  const PartialDims x = PartialDims::named(*mesh, {"x"});
  CHECK(PartialDims() < x);
  CHECK((x < zy) != (zy < x));
  CHECK_FALSE(zy < zy);

  CHECK_THROWS_WITH(PartialDims::named(*mesh, {"y", "w"}), "[dtensor] partial dims y,w are not all mesh dims");
  CHECK_THROWS_WITH(PartialDims::named(*mesh, {"y", "y"}), "[dtensor] partial dims y,y are not all mesh dims");

  // A DTensor built from names and one built from the set have the same partial dims.
  Layout layout({"x", kUnsharded}, mesh);
  Tensor local(layout.local_shape({4, 4}));
  CHECK(DTensor({4, 4}, layout, local, {"z", "y"}).partial() == DTensor({4, 4}, layout, local, zy).partial());
  CHECK(DTensor({4, 4}, layout, local, zy).describe() == "(4,4) [x, unsharded] partial{y,z}");
  CHECK_THROWS_WITH(DTensor({4, 4}, layout, local, PartialDims::named(*mesh, {"x"})),
                    "[dtensor] mesh dim 'x' cannot both shard and be partial");

  // At most 32 mesh dims, so that a set of them fits in the bits.
  std::vector<std::string> names;
  for (int i = 0; i < 33; ++i) names.push_back(fmt::format("d{}", i));
  CHECK_THROWS_WITH_AS(Mesh(names, std::vector<int>(33, 1)), "[mesh] 33 dims; a mesh has at most 32", UsageError);
  names.pop_back();
  PartialDims last;
  last.add(31);
  CHECK(last.names(Mesh(names, std::vector<int>(32, 1))) == std::vector<std::string>{"d31"});
}
