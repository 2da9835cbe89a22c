#!/usr/bin/env python3
"""Writes tensorboard/compat/proto/*.proto here: the definitions of TensorBoard's event files that dtrain needs
(event.proto and what it imports), as the pip package `tensorboard` holds them.

The package ships them compiled (tensorboard/compat/proto/*_pb2.py), each with its file's descriptor; this
script prints those descriptors back as .proto text (comments are not in them), then checks its output:
protoc must compile the written files to the very same descriptors.

    .venv/bin/python third_party/tensorboard_proto/regenerate.py   # the .venv of scripts/python_env.sh
"""
import os
import subprocess
import sys
import tempfile

import tensorboard
from google.protobuf import descriptor_pb2
from tensorboard.compat.proto import event_pb2

HERE = os.path.dirname(os.path.abspath(__file__))

LICENSE = """\
// Copyright The TensorFlow Authors. All Rights Reserved.
//
// Licensed under the Apache License, Version 2.0 (the "License");
// you may not use this file except in compliance with the License.
// You may obtain a copy of the License at
//
//     http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing, software
// distributed under the License is distributed on an "AS IS" BASIS,
// WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
// See the License for the specific language governing permissions and
// limitations under the License.
//
// From the pip package tensorboard {version} ({name}), printed from its compiled descriptor by
// third_party/tensorboard_proto/regenerate.py: the definitions are TensorBoard's, the comments are not kept.
"""

FD = descriptor_pb2.FieldDescriptorProto
SCALAR_TYPES = {
    FD.TYPE_DOUBLE: "double", FD.TYPE_FLOAT: "float", FD.TYPE_INT64: "int64", FD.TYPE_UINT64: "uint64",
    FD.TYPE_INT32: "int32", FD.TYPE_FIXED64: "fixed64", FD.TYPE_FIXED32: "fixed32", FD.TYPE_BOOL: "bool",
    FD.TYPE_STRING: "string", FD.TYPE_BYTES: "bytes", FD.TYPE_UINT32: "uint32", FD.TYPE_SFIXED32: "sfixed32",
    FD.TYPE_SFIXED64: "sfixed64", FD.TYPE_SINT32: "sint32", FD.TYPE_SINT64: "sint64",
}


def option_value(field, value):
    if field.type == field.TYPE_BOOL:
        return "true" if value else "false"
    if field.type == field.TYPE_STRING:
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if field.type == field.TYPE_ENUM:
        return field.enum_type.values_by_number[value].name
    return str(value)


def is_repeated(field):
    # `label` is gone from newer protobuf releases' descriptors, `is_repeated` absent from older ones.
    return field.is_repeated if hasattr(field, "is_repeated") else field.label == field.LABEL_REPEATED


def options_list(options):
    """The options that are set, as "name = value" ("" for none); only plain (non-message) options occur here."""
    items = []
    for field, value in options.ListFields():
        if field.type == field.TYPE_MESSAGE or is_repeated(field):
            sys.exit(f"regenerate.py: option {field.name} is not printable by this script")
        items.append(f"{field.name} = {option_value(field, value)}")
    return items


def field_type(field):
    if field.type in (FD.TYPE_MESSAGE, FD.TYPE_ENUM):
        return field.type_name
    if field.type == FD.TYPE_GROUP:
        sys.exit("regenerate.py: groups are not printable by this script")
    return SCALAR_TYPES[field.type]


def field_line(field):
    label = "repeated " if field.label == FD.LABEL_REPEATED else ("optional " if field.proto3_optional else "")
    options = options_list(field.options)
    suffix = f" [{', '.join(options)}]" if options else ""
    return f"{label}{field_type(field)} {field.name} = {field.number}{suffix};"


def print_enum(enum, indent, out):
    pad = "  " * indent
    out.append(f"{pad}enum {enum.name} {{")
    for option in options_list(enum.options):
        out.append(f"{pad}  option {option};")
    for value in enum.value:
        options = options_list(value.options)
        suffix = f" [{', '.join(options)}]" if options else ""
        out.append(f"{pad}  {value.name} = {value.number}{suffix};")
    for reserved in enum.reserved_range:  # an enum's range includes its end
        out.append(f"{pad}  reserved {reserved.start}" + ("" if reserved.end == reserved.start else f" to {reserved.end}") + ";")
    for name in enum.reserved_name:
        out.append(f'{pad}  reserved "{name}";')
    out.append(f"{pad}}}")


def print_message(message, indent, out):
    pad = "  " * indent
    if message.extension_range or message.extension or message.options.map_entry:
        sys.exit(f"regenerate.py: {message.name}: extensions and maps are not printable by this script")
    out.append(f"{pad}message {message.name} {{")
    for option in options_list(message.options):
        out.append(f"{pad}  option {option};")
    open_oneof = None
    for field in message.field:
        oneof = field.oneof_index if field.HasField("oneof_index") and not field.proto3_optional else None
        if oneof != open_oneof:
            if open_oneof is not None:
                out.append(f"{pad}  }}")
            if oneof is not None:
                out.append(f"{pad}  oneof {message.oneof_decl[oneof].name} {{")
            open_oneof = oneof
        out.append(f"{pad}  {'  ' if oneof is not None else ''}{field_line(field)}")
    if open_oneof is not None:
        out.append(f"{pad}  }}")
    for reserved in message.reserved_range:  # a message's range excludes its end
        last = reserved.end - 1
        out.append(f"{pad}  reserved {reserved.start}" + ("" if last == reserved.start else f" to {last}") + ";")
    for name in message.reserved_name:
        out.append(f'{pad}  reserved "{name}";')
    for enum in message.enum_type:
        print_enum(enum, indent + 1, out)
    for nested in message.nested_type:
        print_message(nested, indent + 1, out)
    out.append(f"{pad}}}")


def proto_text(file):
    if file.service or file.extension:
        sys.exit(f"regenerate.py: {file.name}: services and extensions are not printable by this script")
    out = [LICENSE.format(version=tensorboard.__version__, name=file.name).rstrip("\n"), "",
           f'syntax = "{file.syntax}";', "", f"package {file.package};", ""]
    for index, dependency in enumerate(file.dependency):
        kind = "public " if index in file.public_dependency else "weak " if index in file.weak_dependency else ""
        out.append(f'import {kind}"{dependency}";')
    if file.dependency:
        out.append("")
    out += [f"option {option};" for option in options_list(file.options)]
    for enum in file.enum_type:
        out.append("")
        print_enum(enum, 0, out)
    for message in file.message_type:
        out.append("")
        print_message(message, 0, out)
    return "\n".join(out) + "\n"


def files_needed(root):
    """event.proto and every file it imports, directly or not, each as its FileDescriptorProto."""
    files, todo = {}, [root]
    while todo:
        descriptor = todo.pop()
        if descriptor.name in files:
            continue
        proto = descriptor_pb2.FileDescriptorProto()
        descriptor.CopyToProto(proto)
        files[descriptor.name] = proto
        todo += descriptor.dependencies
    return files


def without_json_names(proto):
    def strip(message):
        for field in message.field:
            field.ClearField("json_name")
        for nested in message.nested_type:
            strip(nested)
    for message in proto.message_type:
        strip(message)
    return proto


def main():
    files = files_needed(event_pb2.DESCRIPTOR)
    for name, proto in sorted(files.items()):
        path = os.path.join(HERE, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as out:
            out.write(proto_text(proto))
        print(f"wrote {os.path.relpath(path, HERE)}")
    with tempfile.TemporaryDirectory() as scratch:
        descriptor_set = os.path.join(scratch, "set.pb")
        subprocess.run(["protoc", f"--proto_path={HERE}", f"--descriptor_set_out={descriptor_set}", *sorted(files)],
                       check=True)
        compiled = descriptor_pb2.FileDescriptorSet()
        with open(descriptor_set, "rb") as data:
            compiled.ParseFromString(data.read())
    for proto in compiled.file:
        if without_json_names(proto) != without_json_names(files[proto.name]):
            sys.exit(f"regenerate.py: {proto.name} does not compile back to the package's descriptor")
    if len(compiled.file) != len(files):
        sys.exit("regenerate.py: protoc compiled another number of files than were written")
    print(f"protoc compiles the {len(files)} files back to tensorboard {tensorboard.__version__}'s descriptors")


if __name__ == "__main__":
    main()
