# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

# Note that this plugin util is **PRIVATE** to the collection. It can have
# breaking changes at any time. Do not use it from other collections or
# standalone plugins!

"""The fleet report: what the accel.nodes.fleet_report callback saw of each node in one ansible-playbook run,
as one screen, JSON (tests/schemas/fleet-report.schema.json) and JUnit XML.

A node's status, first match wins:
- unreachable: Ansible could not reach it (the last such message is the reason);
- needs_reboot: a driver role set nvidia_driver_reboot_required or neuron_driver_reboot_required, and no later validation passed;
- fail: its validation report says fail (the reasons are the failed checks), or a task failed on it;
- pass: its validation report says pass;
- not_validated: it ran without a validation report (check mode, accel_nodes_validate=false, or a play that
  does not validate);
- not_run: a play targeted it, but no task ran on it (the run stopped before its batch).

Each node also lists the findings of accel.nodes.diagnose (issue 28): those its validation report holds (the role
diagnoses a node that fails a check, and links each failed check to the findings that explain it), or those of the
accel.nodes.diagnose playbook (its accel_nodes_diagnosis fact), so that one table shows what is wrong with many nodes.

With a fail threshold (a percentage), the report also gives the run's verdict: the share of nodes that are
unreachable, needs_reboot, fail or not_run, and exit status 0 when that share is at most the threshold, else 2
(what ansible-playbook returns for failed hosts). not_validated is not bad: check mode and validate=false runs
end there.
"""

from __future__ import annotations

import json
import typing as t
from xml.etree import ElementTree

SCHEMA_VERSION = 1
STATUSES = ('unreachable', 'needs_reboot', 'fail', 'pass', 'not_validated', 'not_run')
LAYERS = ('host', 'runtime', 'container', 'cri')
BAD = ('unreachable', 'needs_reboot', 'fail', 'not_run')
EXIT_OVER_THRESHOLD = 2


def node(host: str, seen: t.Mapping[str, t.Any]) -> dict[str, t.Any]:
    """One node of the report. seen: unreachable (message or None), failed ({task, msg} or None), validation
    (the accel.nodes.accelerator_validation report, or None), reboot_required (bool), ran (bool: a task ran on
    it; default true), findings (the accel.nodes.diagnose playbook's, or None)."""
    validation = seen.get('validation') if isinstance(seen.get('validation'), dict) else None
    failed = seen.get('failed') or None
    layers = dict((validation or {}).get('layers') or {})
    reasons: list[dict[str, t.Any]] = []
    for check in (validation or {}).get('checks') or []:
        if check.get('status') == 'fail':
            reasons.append({'check': str(check.get('name')), 'layer': str(check.get('layer')),
                            'detail': str(check.get('detail')), 'findings': [str(i) for i in check.get('findings') or []]})
    if seen.get('unreachable'):
        status = 'unreachable'
        reasons = [{'check': 'reach', 'layer': 'ansible', 'detail': str(seen['unreachable']), 'findings': []}]
    elif seen.get('reboot_required') and (validation or {}).get('status') != 'pass':
        status = 'needs_reboot'
        # site.yml fails such a node with why no reload could load the driver (issue 27): that is the reason.
        reasons.append({'check': 'reboot', 'layer': 'host',
                        'detail': str(failed.get('msg')) if failed and failed.get('msg') else
                        'a new driver is installed and the node has not been rebooted to load it', 'findings': []})
    elif (validation or {}).get('status') == 'fail' or failed:
        status = 'fail'
    elif (validation or {}).get('status') == 'pass':
        status = 'pass'
    elif not seen.get('ran', True):
        status = 'not_run'
    else:
        status = 'not_validated'
    if failed and status != 'unreachable' and not reasons:
        reasons.append({'check': 'task', 'layer': 'ansible',
                        'detail': '%s: %s' % (failed.get('task'), failed.get('msg')), 'findings': []})
    findings = seen.get('findings') if isinstance(seen.get('findings'), list) else (validation or {}).get('findings')
    return {'host': host, 'status': status, 'layers': layers, 'reasons': reasons,
            'findings': [dict((k, str(f.get(k))) for k in ('id', 'severity', 'summary', 'fix'))
                         for f in findings or [] if isinstance(f, dict)],
            'vendors': list((validation or {}).get('vendors') or []),
            'validated_at': (validation or {}).get('timestamp')}


def fail_threshold(value: t.Any) -> float | None:
    """The fail_threshold option as a percentage, None when unset. ValueError, saying what is wanted, otherwise."""
    if value is None:
        return None
    try:
        percentage = float(value)
    except (TypeError, ValueError):
        percentage = None
    # NaN fails both comparisons, so it is refused too.
    if isinstance(value, bool) or percentage is None or not 0 <= percentage <= 100:
        raise ValueError('fail_threshold is a percentage of nodes, from 0 to 100, not %r' % (value,))
    return percentage


def verdict(nodes: t.Sequence[t.Mapping[str, t.Any]], percentage: float | None,
            decided: bool = True) -> dict[str, t.Any] | None:
    """The threshold's verdict on these nodes, None without a threshold. decided: false when a later report of the
    same run decides the exit status (exit_status is then null)."""
    if percentage is None:
        return None
    bad = sum(1 for n in nodes if n['status'] in BAD)
    # Not rounded, so that the JSON's bad_percentage and fail_percentage compare as the exit status did.
    share = 100.0 * bad / len(nodes) if nodes else 0.0
    return {'fail_percentage': percentage, 'bad': bad, 'nodes': len(nodes), 'bad_percentage': share,
            'exit_status': (EXIT_OVER_THRESHOLD if share > percentage else 0) if decided else None}


def build(seen: t.Mapping[str, t.Mapping[str, t.Any]], playbook: str, generated_at: str,
          threshold: float | None = None, decided: bool = True) -> dict[str, t.Any]:
    """The report of every node in seen ({host: what the callback saw}), sorted by host, with the verdict of
    threshold (see verdict)."""
    nodes = [node(host, seen[host]) for host in sorted(seen)]
    counts = dict((status, sum(1 for n in nodes if n['status'] == status)) for status in STATUSES)
    return {'schema_version': SCHEMA_VERSION, 'playbook': playbook, 'generated_at': generated_at,
            'total': len(nodes), 'counts': counts, 'nodes': nodes, 'threshold': verdict(nodes, threshold, decided)}


def _cut(line: str, width: int) -> str:
    return line if len(line) <= width else line[:width - 3] + '...'


def _percent(value: float) -> str:
    return ('%.2f' % value).rstrip('0').rstrip('.') + '%'


def text(report: t.Mapping[str, t.Any], width: int = 100) -> str:
    """One screen: a line per node with each layer's status, then a line per reason (and one naming the findings
    that explain it), then a line per finding with its fix."""
    header = '%-28s %-13s %s' % ('NODE', 'STATUS', '  '.join('%-9s' % layer for layer in LAYERS))
    lines = ['accel.nodes fleet report: %d node(s)' % report['total'],
             '  ' + ', '.join('%d %s' % (report['counts'][s], s) for s in STATUSES if report['counts'][s]), header]
    for n in report['nodes']:
        lines.append('%-28s %-13s %s' % (n['host'][:28], n['status'],
                                         '  '.join('%-9s' % n['layers'].get(layer, '-') for layer in LAYERS)))
        for reason in n['reasons']:
            lines.append(_cut('    %s/%s: %s' % (reason['layer'], reason['check'], ' '.join(reason['detail'].split())),
                              width))
            if reason['findings']:
                lines.append(_cut('      explained by %s' % ', '.join(reason['findings']), width))
        for f in n['findings']:
            lines.append(_cut('    [%s] %s: %s' % (f['severity'], f['id'], ' '.join(f['fix'].split())), width))
    threshold = report.get('threshold')
    if threshold:
        lines.append('fail_threshold %s: %d of %d node(s) (%s) are %s or %s' % (
            _percent(threshold['fail_percentage']), threshold['bad'], threshold['nodes'],
            _percent(threshold['bad_percentage']), ', '.join(BAD[:-1]), BAD[-1]))
        if threshold['exit_status'] is None:
            lines.append("  the last playbook's report sets the exit status, if Ansible runs it")
        else:
            over = 'over' if threshold['exit_status'] else 'within'
            lines.append('  %s the threshold: exit status %d' % (over, threshold['exit_status']))
    return '\n'.join(lines) + '\n'


def to_json(report: t.Mapping[str, t.Any]) -> str:
    return json.dumps(report, indent=2, sort_keys=True) + '\n'


def junit(report: t.Mapping[str, t.Any]) -> str:
    """JUnit XML: a testsuite per node, a testcase per layer (skipped, passed or failed with the failed checks'
    details), a testcase for its diagnosis where it has findings (failed with the broken ones' fixes), and for an
    unreachable node or one waiting for a reboot a testcase that errors or fails."""
    suites = ElementTree.Element('testsuites', name='accel.nodes fleet report (%s)' % report['playbook'])
    total = failures = errors = skipped = 0
    for n in report['nodes']:
        suite = ElementTree.SubElement(suites, 'testsuite', name=n['host'])
        cases: list[tuple[str, str, str]] = []  # (name, outcome, message)
        if n['status'] == 'unreachable':
            cases.append(('reach', 'error', n['reasons'][0]['detail']))
        else:
            for layer in LAYERS:
                state = n['layers'].get(layer)
                details = '; '.join(r['check'] + ': ' + r['detail'] for r in n['reasons'] if r['layer'] == layer
                                    and r['check'] != 'reboot')
                outcome = {'pass': 'pass', 'fail': 'failure'}.get(state, 'skipped')
                cases.append((layer, outcome, details or ('not run' if state is None else str(state))))
            extra = [r for r in n['reasons'] if r['layer'] == 'ansible' or r['check'] == 'reboot']
            for reason in extra:
                cases.append((reason['check'], 'failure', reason['detail']))
            if n['findings']:
                broken = [f for f in n['findings'] if f['severity'] == 'broken']
                cases.append(('diagnosis', 'failure' if broken else 'pass',
                              '; '.join('%s: %s' % (f['id'], f['fix']) for f in broken)))
            if n['status'] in ('not_validated', 'not_run'):
                cases.append(('validation', 'skipped', 'the node ran without a validation report'
                              if n['status'] == 'not_validated' else 'no task ran on the node'))
        counts = {'failure': 0, 'error': 0, 'skipped': 0}
        for name, outcome, message in cases:
            case = ElementTree.SubElement(suite, 'testcase', name=name, classname='accel.nodes.%s' % n['host'])
            if outcome != 'pass':
                ElementTree.SubElement(case, outcome, message=message[:1000]).text = message
                counts[outcome] += 1
        suite.set('tests', str(len(cases)))
        suite.set('failures', str(counts['failure']))
        suite.set('errors', str(counts['error']))
        suite.set('skipped', str(counts['skipped']))
        total += len(cases)
        failures += counts['failure']
        errors += counts['error']
        skipped += counts['skipped']
    suites.set('tests', str(total))
    suites.set('failures', str(failures))
    suites.set('errors', str(errors))
    suites.set('skipped', str(skipped))
    return ElementTree.tostring(suites, encoding='unicode') + '\n'
