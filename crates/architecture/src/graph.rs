//! Strongly connected components of a directed graph (Tarjan's algorithm): each component of
//! more than one node is a circle of imports.

use std::collections::BTreeSet;

/// The components with more than one node, each sorted, in a stable order.
pub fn circles(nodes: usize, edges: &BTreeSet<(usize, usize)>) -> Vec<Vec<usize>> {
    let mut adjacency = vec![Vec::new(); nodes];
    for &(a, b) in edges {
        adjacency[a].push(b);
    }
    let mut state = Tarjan {
        adjacency,
        index: vec![None; nodes],
        low: vec![0; nodes],
        on_stack: vec![false; nodes],
        stack: Vec::new(),
        next: 0,
        components: Vec::new(),
    };
    for v in 0..nodes {
        if state.index[v].is_none() {
            state.connect(v);
        }
    }
    let mut out: Vec<Vec<usize>> = state
        .components
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|mut c| {
            c.sort();
            c
        })
        .collect();
    out.sort();
    out
}

struct Tarjan {
    adjacency: Vec<Vec<usize>>,
    index: Vec<Option<usize>>,
    low: Vec<usize>,
    on_stack: Vec<bool>,
    stack: Vec<usize>,
    next: usize,
    components: Vec<Vec<usize>>,
}

impl Tarjan {
    fn connect(&mut self, v: usize) {
        self.index[v] = Some(self.next);
        self.low[v] = self.next;
        self.next += 1;
        self.stack.push(v);
        self.on_stack[v] = true;
        for i in 0..self.adjacency[v].len() {
            let w = self.adjacency[v][i];
            match self.index[w] {
                None => {
                    self.connect(w);
                    self.low[v] = self.low[v].min(self.low[w]);
                }
                Some(iw) if self.on_stack[w] => self.low[v] = self.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(self.low[v]) == self.index[v] {
            let mut component = Vec::new();
            loop {
                let w = self.stack.pop().expect("v is on the stack");
                self.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            self.components.push(component);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_circle_of_three_and_leaves_a_chain_alone() {
        let edges: BTreeSet<_> = [(0, 1), (1, 2), (2, 0), (2, 3), (3, 4)]
            .into_iter()
            .collect();
        assert_eq!(circles(5, &edges), vec![vec![0, 1, 2]]);
    }
}
