# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

"""examples/aws_ec2.yml must reach every instance type the EC2 catalog knows."""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

import pytest
import yaml

from ansible_collections.accel.nodes.plugins.module_utils import _ec2_catalog

EXAMPLE = Path(__file__).resolve().parents[2] / 'examples' / 'aws_ec2.yml'


@pytest.fixture(scope='module')
def inventory():
    return yaml.safe_load(EXAMPLE.read_text())


def _group_regex(expression):
    # The groups are written as "instance_type is match('<regex>')"; take the regex.
    return re.compile(re.search(r"match\('(.*?)'\)", expression).group(1).replace('\\\\', '\\'))


@pytest.mark.parametrize('instance_type', sorted(_ec2_catalog.CATALOG))
def test_every_catalog_type_is_filtered_in_and_grouped(inventory, instance_type):
    patterns = inventory['filters']['instance-type']
    assert any(fnmatch.fnmatch(instance_type, p) for p in patterns), instance_type
    vendor = _ec2_catalog.CATALOG[instance_type][0]
    assert _group_regex(inventory['groups']['accel_expect_' + vendor]).match(instance_type), instance_type


@pytest.mark.parametrize('instance_type', sorted(_ec2_catalog.NVSWITCH_GENERATION))
def test_nvswitch_group_matches_the_catalog(inventory, instance_type):
    expression = inventory['groups']['accel_expect_nvswitch']
    assert _group_regex(expression).match(instance_type) or "'%s'" % instance_type in expression


def test_nvswitch_group_leaves_the_single_gpu_p5_out(inventory):
    expression = inventory['groups']['accel_expect_nvswitch']
    assert not _group_regex(expression).match('p5.4xlarge') and "'p5.4xlarge'" not in expression
